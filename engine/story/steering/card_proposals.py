"""Cards the story proposes to the host every few turns, privately, for them to add or not.

AI Dungeon's story-card generator and the Auto-Cards script write cards while the story goes;
here an adventure's ``card_proposals`` setting (every N turns, 0: never; ``/adventure
settings``) has the story propose one card every N turns played: about the name the recent
story mentions most with no card (``card_writer``), shown to the host alone, added only when
the host presses Add.

After a turn is stored, ``after_turn`` runs in the background (the front end schedules it: the
player's turn never waits for it). It decides in the database: the turns the adventure has
played are counted, and at a multiple of its setting one row of ``card_proposals`` is inserted
for that count, or found there (another process, or this one for a turn undone and played
again). Only the process whose insert went in asks the model; whatever the answer, the row
stays, so a proposal that was skipped (no subject, no room, the rate limit or the day's tokens
used, no card in the answer) is not tried again until the next multiple.

It is the model's work, so it is paid for as ``/card generate`` is (``Kind.CARD_WRITE`` on the
host's rate limit, without a strike: nobody asked for it just now), and counted against the
host's and the server's day as background work is (``engine.story.background_spend``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import func, select, update
from sqlmodel import col

from engine.errors import CampfireError, NotFound, StoryMovedOn
from engine.people.access.checks import check_may_take_card_proposal
from engine.people.access.rules import Actor
from engine.storage.card_proposal_models import CardProposalRecord, CardProposalState
from engine.storage.changes import rows_changed
from engine.storage.dialect import insert_for
from engine.storage.models import ActionType, Adventure, Role, StoryNode, utcnow
from engine.story.steering.cards import CardDraft, CardView

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from engine.storage.database import Database
    from engine.story.steering.card_writer import CardWriter
    from engine.story.steering.cards import StoryCards

log = logging.getLogger(__name__)

#: Every how many turns, when on: often enough to follow a story, rarely enough not to nag
#: (and to bound what it spends: one model call per this many turns at most).
CARD_PROPOSALS_RANGE = (5, 100)

_TABLE = CardProposalRecord.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class ProposedCard:
    """A card the story proposed, for the front end to show its host."""

    id: int
    adventure_id: int
    adventure_title: str
    #: Where the adventure runs (its channel, thread or DM).
    channel_id: int | None
    host_id: int
    #: The adventure's turn count it was proposed at.
    turn: int
    subject: str
    draft: CardDraft


#: What the front end does with a proposal: shows it to the host. ``request_id``: the request
#: (interaction) that played the turn it follows.
Deliver = Callable[[ProposedCard, int | None], Awaitable[None]]


class CardProposals:
    """Proposes cards after turns, and adds or discards them when the host says."""

    def __init__(self, db: Database, writer: CardWriter, cards: StoryCards) -> None:
        self.db = db
        self.writer = writer
        self.cards = cards
        #: Set by the front end: how a proposal reaches the host.
        self.deliver: Deliver | None = None

    async def after_turn(self, adventure_id: int, request_id: int | None = None) -> None:
        """Propose a card if this adventure's turn count is a multiple of its setting, and
        nobody proposed one for that count yet; hand it to ``deliver``."""
        proposed = await self.propose(adventure_id)
        if proposed is not None and self.deliver is not None:
            await self.deliver(proposed, request_id)

    async def propose(self, adventure_id: int) -> ProposedCard | None:
        """The card proposed after this turn, stored as ready; None when none is due, another
        process claimed it, or there was nothing to propose."""
        # Asked after every turn, and off in most adventures: a read says so without a write
        # transaction (on SQLite one would wait its turn at the write gate beside the turns).
        async with self.db.session() as session:
            every = await session.scalar(
                select(col(Adventure.card_proposals)).where(col(Adventure.id) == adventure_id)
            )
        if every is None or every <= 0:
            return None
        async with self.db.transaction() as session:
            claim = await _claim(session, adventure_id)
        if claim is None:
            return None
        host = Actor(user_id=claim.host_id, server_id=claim.server_id)
        proposal = None
        try:
            proposal = await self.writer.propose_unasked(adventure_id, host)
        except CampfireError as error:
            # The model's answer was no card, or the model failed: skipped, not retried.
            log.info(
                "card proposal for adventure %s skipped: %s", adventure_id, type(error).__name__
            )
        finally:
            # Whatever happens (cut off included), the claim is settled: no retry storm.
            async with self.db.transaction() as session:
                values: dict[str, object] = {"state": CardProposalState.SKIPPED}
                if proposal is not None:
                    draft = proposal.draft
                    values = {
                        "state": CardProposalState.READY,
                        "title": draft.title,
                        "type": draft.type,
                        "keys": draft.keys,
                        "entry": draft.entry,
                    }
                await session.execute(
                    update(CardProposalRecord)
                    .where(col(CardProposalRecord.id) == claim.record_id)
                    .values(**values)
                )
        if proposal is None:
            return None
        return ProposedCard(
            claim.record_id,
            adventure_id,
            claim.title,
            claim.channel_id,
            claim.host_id,
            claim.turn,
            proposal.subject,
            proposal.draft,
        )

    async def settle(self, proposal_id: int, actor: Actor, *, add: bool) -> CardView | None:
        """The host's Add (the card, added) or Discard (None). Refused to anyone the card was
        not proposed to, for a proposal already settled, or an adventure that ended; the card
        is added under the same rules as any other (the right to steer, the room), and the
        proposal is settled in the same transaction, so two presses add it once."""
        async with self.db.transaction() as session:
            record = await session.get(CardProposalRecord, proposal_id)
            adventure = (
                None
                if record is None
                else await session.get(Adventure, record.adventure_id, with_for_update=True)
            )
            if record is None or adventure is None or adventure.ended_at is not None:
                raise StoryMovedOn(
                    "That adventure has ended (or was deleted); the proposed card was not added."
                )
            check_may_take_card_proposal(adventure, actor, record.host_id)
            settled = await rows_changed(
                session,
                update(CardProposalRecord)
                .where(
                    col(CardProposalRecord.id) == proposal_id,
                    col(CardProposalRecord.state) == CardProposalState.READY,
                )
                .values(state=CardProposalState.ADDED if add else CardProposalState.DISCARDED),
            )
            if not settled:
                raise NotFound(
                    "No card waits in this proposal any more: it was already added or discarded."
                )
            if not add:
                return None
            draft = CardDraft(record.title, record.keys, record.entry, record.type)
            return await self.cards.add_in(session, adventure, actor, draft)


@dataclass(frozen=True, slots=True)
class _Claim:
    """A proposal this process claimed, with what it needs of the adventure."""

    record_id: int
    turn: int
    title: str
    channel_id: int | None
    server_id: int | None
    host_id: int


async def turn_count(session: AsyncSession, adventure_id: int) -> int:
    """The turns the adventure has played: its narrator entries besides the opening, on any
    branch (a retry adds a take, not an entry; a turn undone and played again counts again)."""
    count = await session.scalar(
        select(func.count())
        .select_from(StoryNode)
        .where(
            col(StoryNode.adventure_id) == adventure_id,
            col(StoryNode.role) == Role.NARRATOR,
            col(StoryNode.action) != ActionType.START,
        )
    )
    return int(count or 0)


async def _claim(session: AsyncSession, adventure_id: int) -> _Claim | None:
    """Claim the proposal due now: the row's id and the adventure; None when none is due or
    it is claimed already. The unique ``(adventure_id, turn)`` decides between processes: on
    PostgreSQL a concurrent insert waits for the first one's transaction, then conflicts."""
    adventure = await session.get(Adventure, adventure_id)
    if adventure is None or adventure.ended_at is not None or adventure.card_proposals <= 0:
        return None
    # A server adventure's host; a DM adventure's player.
    host_id = adventure.host_id or adventure.owner_id
    if host_id is None:
        return None
    turns = await turn_count(session, adventure_id)
    if turns == 0 or turns % adventure.card_proposals:
        return None
    claimed = await session.scalar(
        insert_for(session, _TABLE)
        .values(
            adventure_id=adventure_id,
            turn=turns,
            host_id=host_id,
            state=CardProposalState.WRITING,
            title="",
            type="",
            keys="",
            entry="",
            created_at=utcnow(),
        )
        .on_conflict_do_nothing(index_elements=["adventure_id", "turn"])
        .returning(_TABLE.c.id)
    )
    if claimed is None:
        return None
    return _Claim(
        int(claimed),
        turns,
        adventure.title,
        adventure.channel_id,
        adventure.server_id,
        host_id,
    )
