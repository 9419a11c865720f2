"""Rounds (``/host mode rounds|host``): each player submits one action a round, and one
narration answers the round's actions together, in the order they were submitted.

The actions waiting for their round are rows of ``round_actions`` (so every process sees the
same round); a player's second action replaces their first and keeps its place. A round closes
once: its closer takes every waiting row in one DELETE (``take_round``), and a closer that finds
none taken (another closed the round first) plays nothing. In ``rounds`` mode a round closes
when every player of the party has acted, when the host presses Close, or when it has waited
the round timeout; in ``host`` mode only the host's Close ends it. ``engine.play.service`` plays the
closed round as one turn (``TurnEngine.play_actions``): an action node for each, one narrator
node below them, so retry and undo take the round as one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput
from engine.people.party import party_order
from engine.storage.models import Adventure, TurnMode, User, utcnow
from engine.storage.party_models import Character, MutedPlayer, RoundAction
from engine.story.actions import ActionType, PlayerAction

__all__ = [
    "ROUND_MAX",
    "RoundPlayer",
    "RoundState",
    "TurnMode",
    "round_state",
    "submit_to_round",
    "take_round",
]

#: The most actions one round holds (undo reaches back over this many action nodes).
ROUND_MAX = 25
#: How a close that came second is answered.
ROUND_CLOSED = "This round was closed already; its narration is on its way."
NOTHING_TO_CLOSE = "Nobody has acted this round yet, so there is nothing to close."


@dataclass(frozen=True, slots=True)
class RoundPlayer:
    user_id: int
    name: str
    acted: bool


@dataclass(frozen=True, slots=True)
class RoundState:
    """A round as it stands: the party, who has acted, when it opened."""

    adventure_id: int
    mode: TurnMode
    players: tuple[RoundPlayer, ...]
    #: When its first action came (None: nobody has acted yet).
    opened_at: datetime | None

    @property
    def acted(self) -> int:
        return sum(player.acted for player in self.players)

    @property
    def complete(self) -> bool:
        """Everyone has acted, and the mode closes a round then (``host`` waits for Close)."""
        return (
            self.mode is TurnMode.ROUNDS
            and bool(self.players)
            and all(player.acted for player in self.players)
        )


def as_utc(when: datetime) -> datetime:
    """SQLite hands back naive times; they were written in UTC."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


async def submit_to_round(
    session: AsyncSession, adventure: Adventure, action: PlayerAction
) -> bool:
    """Keep ``action`` (named, with its author) for the adventure's open round; it replaces the
    author's earlier action there, in that one's place (then True). The adventure's row is
    locked."""
    assert adventure.id is not None and action.author_id is not None
    held = await session.get(RoundAction, (adventure.id, action.author_id))
    if held is not None:
        held.type, held.text, held.actor_name = str(action.type), action.text, action.actor
        await session.flush()
        return True
    rows = (
        await session.execute(
            select(func.count(), func.max(col(RoundAction.position))).where(
                col(RoundAction.adventure_id) == adventure.id
            )
        )
    ).one()
    if rows[0] >= ROUND_MAX:
        raise InvalidInput(
            f"This round already holds {ROUND_MAX} players' actions; wait for it to close."
        )
    session.add(
        RoundAction(
            adventure_id=adventure.id,
            user_id=action.author_id,
            position=(rows[1] or 0) + 1,
            type=str(action.type),
            text=action.text,
            actor_name=action.actor,
        )
    )
    await session.flush()
    return False


async def round_state(session: AsyncSession, adventure: Adventure) -> RoundState:
    """The party (``engine.people.party``, and whoever acted this round; not the muted or removed),
    in the order they came, with who has acted this round."""
    assert adventure.id is not None
    waiting = (
        await session.scalars(
            select(RoundAction)
            .where(col(RoundAction.adventure_id) == adventure.id)
            .order_by(col(RoundAction.position))
        )
    ).all()
    # The host is waited for only when they play (acted, have a character, joined): a game
    # master who only closes rounds is not.
    party = await party_order(session, adventure, host_first=False)
    character_rows = await session.execute(
        select(col(Character.user_id), col(Character.name))
        .where(col(Character.adventure_id) == adventure.id)
        .order_by(col(Character.id))
    )
    characters = {user: name for user, name in character_rows}
    muted = set(
        await session.scalars(
            select(col(MutedPlayer.user_id)).where(col(MutedPlayer.adventure_id) == adventure.id)
        )
    )
    order = [
        user for user in dict.fromkeys([*party, *(w.user_id for w in waiting)]) if user not in muted
    ]
    name_rows = await session.execute(
        select(col(User.id), col(User.name)).where(col(User.id).in_(order))
    )
    names = {user: name for user, name in name_rows}
    acted = {w.user_id: w.actor_name for w in waiting}
    players = tuple(
        RoundPlayer(
            user,
            acted.get(user) or characters.get(user) or names.get(user) or str(user),
            user in acted,
        )
        for user in order
    )
    opened = min((as_utc(w.submitted_at) for w in waiting), default=None)
    return RoundState(adventure.id, TurnMode(adventure.turn_mode), players, opened)


async def take_round(session: AsyncSession, adventure_id: int) -> list[PlayerAction]:
    """Close the adventure's round: its actions, in the order submitted, taken out of waiting
    in one DELETE. Empty when there were none (or another closer took them first)."""
    taken = await session.execute(
        delete(RoundAction)
        .where(col(RoundAction.adventure_id) == adventure_id)
        .returning(
            col(RoundAction.position),
            col(RoundAction.user_id),
            col(RoundAction.type),
            col(RoundAction.text),
            col(RoundAction.actor_name),
        )
    )
    rows = sorted(taken.all(), key=lambda row: row[0])
    # Each character's pronouns as they are now (its name was kept with the action).
    pronouns: dict[int, str] = {}
    if rows:
        found = await session.execute(
            select(col(Character.user_id), col(Character.pronouns)).where(
                col(Character.adventure_id) == adventure_id,
                col(Character.user_id).in_({row[1] for row in rows}),
            )
        )
        pronouns = {user: kept for user, kept in found.all()}
    return [
        PlayerAction(ActionType(kind), text, user, actor, pronouns.get(user, ""))
        for _, user, kind, text, actor in rows
    ]


async def put_back(session: AsyncSession, adventure_id: int, actions: list[PlayerAction]) -> None:
    """A closed round whose narration failed waits again: its actions go back in their
    places, unless their player has acted again since (the newer action stays) or deleted
    their data meanwhile (their words went with it)."""
    for place, action in enumerate(actions, start=1):
        assert action.author_id is not None
        if (
            await session.get(RoundAction, (adventure_id, action.author_id)) is None
            and await session.get(User, action.author_id) is not None
        ):
            session.add(
                RoundAction(
                    adventure_id=adventure_id,
                    user_id=action.author_id,
                    position=place - len(actions),  # before any action submitted since
                    type=str(action.type),
                    text=action.text,
                    actor_name=action.actor,
                )
            )


async def due_for_timeout(session: AsyncSession, adventure_id: int, timeout_s: float) -> bool:
    """Whether the adventure's round has waited ``timeout_s`` since its first action."""
    opened = await session.scalar(
        select(func.min(col(RoundAction.submitted_at))).where(
            col(RoundAction.adventure_id) == adventure_id
        )
    )
    if opened is None:
        return False
    return (utcnow() - as_utc(opened)).total_seconds() >= timeout_s - 0.05
