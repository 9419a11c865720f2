"""Open rounds and the messages that show them (their panels), as the database holds them.

A round is open while actions wait in it (``engine.story.rounds``), which the database knows in
every process and after a restart. Its panel, the one message that shows who has acted and
carries Close, and its timeout's timer live in the process of the channel's shard; when that
process restarts, its successor finds here which rounds are open, where their panels are and
who opened them, so that it edits the same panel and times the round out in the opener's name,
as the lost timer would have. The panel's id is cosmetic: a write that fails is logged, and
the next action posts a new panel.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import col

from engine.storage.database import Database
from engine.storage.models import Adventure, User
from engine.storage.party_models import RoundAction
from engine.story.rounds import TurnMode

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OpenRound:
    """A round waiting for actions, where it is shown and who opened it."""

    adventure_id: int
    channel_id: int
    server_id: int | None
    mode: TurnMode
    #: Its panel's message, when one was shown.
    panel_id: int | None
    #: The player whose action opened it: its timeout closes it in their name.
    opener_id: int
    opener_name: str


class RoundPanelRecords:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def shown(self, adventure_id: int, message_id: int | None) -> None:
        """The adventure's round is shown by ``message_id`` now (None: no panel, the round
        closed)."""
        try:
            async with self.db.transaction() as session:
                await session.execute(
                    update(Adventure)
                    .where(col(Adventure.id) == adventure_id)
                    .values(round_panel_id=message_id)
                )
        except SQLAlchemyError:
            log.warning("could not record the round panel of adventure %s", adventure_id)

    async def panel_of(self, adventure_id: int) -> int | None:
        async with self.db.session() as session:
            return await session.scalar(
                select(col(Adventure.round_panel_id)).where(col(Adventure.id) == adventure_id)
            )

    async def open_rounds(self, ours: Callable[[int | None], bool]) -> list[OpenRound]:
        """The rounds open in running adventures whose server ``ours`` says this process
        serves (its shards'), oldest adventure first."""
        first = (
            select(
                col(RoundAction.adventure_id).label("adventure_id"),
                func.min(col(RoundAction.position)).label("position"),
            )
            .group_by(col(RoundAction.adventure_id))
            .subquery()
        )
        query = (
            select(Adventure, RoundAction, User)
            .join(first, col(Adventure.id) == first.c.adventure_id)
            .join(
                RoundAction,
                (col(RoundAction.adventure_id) == first.c.adventure_id)
                & (col(RoundAction.position) == first.c.position),
            )
            .join(User, col(User.id) == col(RoundAction.user_id))
            .where(
                col(Adventure.ended_at).is_(None),
                col(Adventure.channel_id).is_not(None),
                col(Adventure.turn_mode) != TurnMode.FREE,
            )
            .order_by(col(Adventure.id))
        )
        async with self.db.session() as session:
            rows = (await session.execute(query)).all()
        found = []
        for adventure, opening, opener in rows:
            assert adventure.id is not None and adventure.channel_id is not None
            if not ours(adventure.server_id):
                continue
            found.append(
                OpenRound(
                    adventure.id,
                    adventure.channel_id,
                    adventure.server_id,
                    TurnMode(adventure.turn_mode),
                    adventure.round_panel_id,
                    opener.id,
                    opening.actor_name or opener.name,
                )
            )
        return found
