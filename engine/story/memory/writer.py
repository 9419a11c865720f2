"""The memory bank's background work for one adventure: memories, the summary, embeddings.

``catch_up`` does whatever the cadence says is due, oldest first, and is safe to call at any
time and as often as wanted: after every turn, from the sweep, from two processes at once.

* Never two at once for one adventure, in any process: the work runs under the adventure's job
  lease (``engine.platform.coordination.jobs``), so the model is asked once for each memory. A call
  that finds the lease taken asks the holder to look again before it lets go.
* Against a story cut back while the model was writing (and a holder overtaken after stalling
  past its lease), every write is a compare-and-set: the cursor must still be where the work
  started and the turns it describes must still be on the adventure's line, checked after the
  adventure row is locked for the update. Otherwise nothing is written and the work is looked
  at again from the new state.
* A cursor moves in the transaction that stores its memory or summary, so a job killed midway
  leaves nothing behind and the sweep does the same stretch again, once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased
from sqlmodel import col

from engine.errors import CampfireError, ModelYielded, log_incident
from engine.llm.providers.base import (
    ChatMessage,
    ChatProvider,
    GenerationParams,
    whole_text,
)
from engine.llm.providers.embeddings import EmbeddingClient
from engine.llm.providers.resolver import ProviderResolver
from engine.llm.retrieval.semantic import to_bytes, vector_digest
from engine.people.content import ContentPolicy, banned_words
from engine.people.limits import UsageLimits
from engine.platform.coordination.jobs import JobLeases, memory_job
from engine.storage.changes import rows_changed
from engine.storage.database import Database
from engine.storage.memory_models import Memory, MemoryOrigin, SummaryVersion
from engine.storage.models import Adventure, Server, StoryNode
from engine.story.background_spend import MeteredProvider, charge_of
from engine.story.line.positions import LinePositions, line_positions, story_cut_back
from engine.story.line.read import line_tail
from engine.story.memory.bank import enforce_capacity
from engine.story.memory.cadence import MEMORY_CADENCE, SUMMARY_CADENCE, Cadence
from engine.story.memory.prompts import (
    MEMORY_PARAMS,
    SUMMARY_PARAMS,
    clean_memory,
    clean_summary,
    memory_messages,
    summary_messages,
)

log = logging.getLogger(__name__)

#: Most memories embedded in one request.
EMBED_BATCH = 64
#: A catch-up gives up after this many steps (a story far behind catches up over sweeps).
MAX_STEPS = 40
#: Most adventures one sweep catches up (the rest wait for the next sweep).
SWEEP_BATCH = 50

# What one write attempt came to.
WROTE, LOOK_AGAIN, NOTHING = "wrote", "look again", "nothing"


@dataclass
class CatchUp:
    """What one catch-up did, for logs and tests."""

    adventure_id: int
    memories: int = 0
    summaries: int = 0
    embedded: int = 0
    #: Why model work was not done ("" when it was allowed).
    skipped: str = ""


class _Superseded(Exception):
    """The story or the cursor moved while the model was writing; nothing is stored."""


class MemoryWriter:
    def __init__(
        self,
        db: Database,
        providers: ProviderResolver,
        embedder: EmbeddingClient | None = None,
        *,
        capacity: int = 200,
        memory_cadence: Cadence = MEMORY_CADENCE,
        summary_cadence: Cadence = SUMMARY_CADENCE,
        jobs: JobLeases | None = None,
        limits: UsageLimits | None = None,
        content: ContentPolicy | None = None,
    ) -> None:
        """``providers`` answers which model writes an adventure's memories and summary; where
        it answers none, only embeddings are done. ``jobs``: the job leases, held as this
        process by default. ``limits``: the operator's budget, which work on the operator's
        model is counted against (``engine.story.background_spend``; None: not counted).
        ``content``: the operator's content rules, whose banned words (with the server's and
        the adventure's) are masked in what is stored: memories and the summary go into later
        prompts, and are shown in /memory."""
        self.limits = limits
        self.content = content or ContentPolicy()
        self.db = db
        self.providers = providers
        self.embedder = embedder
        self.capacity = capacity
        self.memory_cadence = memory_cadence
        self.summary_cadence = summary_cadence
        self.jobs = jobs or JobLeases(db)

    # --- entry points --------------------------------------------------------------------------

    async def catch_up(self, adventure_id: int) -> CatchUp:
        """Do the work due for one adventure; errors are logged, never raised."""
        report = CatchUp(adventure_id)
        # Asked after every turn, and most turns leave nothing due (a memory every 6 actions):
        # a read says so without claiming the job's lease (three write transactions).
        async with self.db.session() as session:
            if not await self._has_work(session, adventure_id):
                report.skipped = "nothing due"
                return report
        async with self.jobs.hold(memory_job(adventure_id), ask_again=True) as lease:
            if lease is None:
                # The running job looks again before it stops, and will see what is due now.
                report.skipped = "already running"
                return report
            try:
                while True:
                    await self._work(adventure_id, report)
                    if await self.jobs.release_unless_wanted(lease):
                        break
            except ModelYielded:
                # The embedded model's cores went to a narration; the cadence asks again.
                log.info("memory work for adventure %s paused for a narration", adventure_id)
            except CampfireError as error:
                # The model or embedding endpoint failed: the cursors did not move, so the
                # cadence tries again after the next turn or at the next sweep.
                log.warning("memory work for adventure %s stopped: %s", adventure_id, error)
            except Exception as error:
                log_incident(f"memory work failed (adventure {adventure_id})", error)
        return report

    async def lagging(self, limit: int = SWEEP_BATCH) -> list[int]:
        """Adventures with work due (after a restart, a failed call, a killed job)."""
        smallest = min(
            self.memory_cadence.every,
            self.memory_cadence.first_at - 1,
            self.summary_cadence.every,
            self.summary_cadence.first_at - 1,
        )
        head = aliased(StoryNode)
        # An index is never smaller than the position it ends, so this finds every adventure
        # that could be due (and some that are not; the exact check follows).
        could_be_due = or_(
            col(head.index) - col(Adventure.memory_cursor) > smallest,
            col(head.index) - col(Adventure.summary_cursor) > smallest,
        )
        conditions = [could_be_due]
        if self.embedder is not None:
            unembedded = (
                select(col(Memory.id))
                .where(
                    col(Memory.adventure_id) == col(Adventure.id),
                    col(Memory.forgotten).is_(False),
                    or_(
                        col(Memory.embedding_model).is_(None),
                        col(Memory.embedding_model) != self.embedder.model,
                    ),
                )
                .exists()
            )
            conditions.append(unembedded)
        async with self.db.session() as session:
            rows = (
                await session.execute(
                    select(col(Adventure.id), col(Adventure.head_node_id))
                    .join(head, col(head.id) == col(Adventure.head_node_id))
                    .where(col(Adventure.ended_at).is_(None), or_(*conditions))
                    .order_by(col(Adventure.updated_at))
                )
            ).all()
            running = await self.jobs.running(memory_job(row.id) for row in rows)
            due = []
            for row in rows:
                if len(due) >= limit:
                    break
                if memory_job(row.id) in running:
                    continue
                if await self._has_work(session, row.id):
                    due.append(row.id)
        return due

    async def sweep(self) -> list[CatchUp]:
        """Catch up every adventure that lags, one after another."""
        return [await self.catch_up(adventure_id) for adventure_id in await self.lagging()]

    # --- the work ------------------------------------------------------------------------------

    async def _work(self, adventure_id: int, report: CatchUp) -> None:
        await self._heal(adventure_id)
        provider = await self._background_model(adventure_id, report)
        if provider is not None:
            for _ in range(MAX_STEPS):
                outcome = await self._write_memory(provider, adventure_id)
                if outcome == NOTHING:
                    break
                report.memories += outcome == WROTE
            for _ in range(MAX_STEPS):
                outcome = await self._rewrite_summary(provider, adventure_id)
                if outcome == NOTHING:
                    break
                report.summaries += outcome == WROTE
        report.embedded += await self._embed(adventure_id)

    async def _heal(self, adventure_id: int) -> None:
        """A cursor past the end of the line means the story was cut back without
        ``story_cut_back`` (a head move that forgot it): cut back now to the head, so memories
        of the lost turns go and the cadence is not stalled until the story regrows."""
        async with self.db.transaction() as session:
            adventure = await session.get(Adventure, adventure_id)
            if adventure is None or adventure.head_node_id is None:
                return
            positions = await line_positions(session, adventure.head_node_id)
            if max(adventure.memory_cursor, adventure.summary_cursor) <= positions.count:
                return
            log.warning(
                "adventure %s: memory cursors (%s, %s) past its %s actions; cutting back",
                adventure_id,
                adventure.memory_cursor,
                adventure.summary_cursor,
                positions.count,
            )
            head_index = await session.scalar(
                select(col(StoryNode.index)).where(col(StoryNode.id) == adventure.head_node_id)
            )
            await story_cut_back(session, adventure_id, head_index or 0)

    async def _background_model(self, adventure_id: int, report: CatchUp) -> ChatProvider | None:
        """The model for this adventure's memories and summary; None (and why, in ``report``)
        when the operator's or the server's choice is that none be used."""
        async with self.db.session() as session:
            row = (
                await session.execute(
                    select(Adventure, col(Server.allow_background_model_use))
                    .outerjoin(Server, col(Adventure.server_id) == col(Server.id))
                    .where(col(Adventure.id) == adventure_id)
                )
            ).first()
            if row is not None:
                await self.providers.read(session, row[0])
        if row is None:
            return None
        adventure, allowed = row
        provider = self.providers.for_background(adventure)
        if provider is None:
            report.skipped = "the operator does not allow background use of the model"
            return None
        if allowed is False:
            report.skipped = "the server does not allow background use of the model"
            return None
        if self.limits is not None and self.providers.is_operator_default(adventure):
            charge = charge_of(adventure)
            if not await self.limits.background_allowed(charge):
                report.skipped = "the day's tokens on the operator's model are used"
                return None
            return MeteredProvider(provider, self.limits, charge)
        return provider

    async def _has_work(self, session: AsyncSession, adventure_id: int) -> bool:
        adventure = await session.get(Adventure, adventure_id)
        if adventure is None:
            return False
        positions = await line_positions(session, adventure.head_node_id)
        if max(adventure.memory_cursor, adventure.summary_cursor) > positions.count:
            return True  # cursors past the line's end: ``_heal`` cuts them back
        if self.memory_cadence.due(positions.count, adventure.memory_cursor):
            return True
        if self.summary_cadence.due(positions.count, adventure.summary_cursor):
            return await self._unfolded(session, adventure_id, positions, adventure) != []
        if self.embedder is None:
            return False
        missing = await session.scalar(
            select(func.count())
            .select_from(Memory)
            .where(
                col(Memory.adventure_id) == adventure_id,
                col(Memory.forgotten).is_(False),
                or_(
                    col(Memory.embedding_model).is_(None),
                    col(Memory.embedding_model) != self.embedder.model,
                ),
            )
        )
        return bool(missing)

    async def _write_memory(self, provider: ChatProvider, adventure_id: int) -> str:
        """Write the memory due now, if one is."""
        async with self.db.session() as session:
            adventure = await session.get(Adventure, adventure_id)
            if adventure is None:
                return NOTHING
            positions = await line_positions(session, adventure.head_node_id)
            stretch = self.memory_cadence.due(positions.count, adventure.memory_cursor)
            if stretch is None:
                return NOTHING
            after, through = stretch
            first, last = positions.sources(after, through)
            end_id = positions.id_at(through)
            assert end_id is not None
            nodes = await line_tail(session, end_id, last - first + 1)
            banned = await banned_words(session, adventure, self.content)
        passage = "\n\n".join(n.text.strip() for n in nodes if n.index >= first and n.text.strip())
        text = banned.mask(
            clean_memory(await self._ask(provider, memory_messages(passage), MEMORY_PARAMS))
        )
        if not text:
            log.warning("the model wrote an empty memory for adventure %s", adventure_id)
            return NOTHING
        try:
            async with self.db.transaction() as session:
                await self._advance(
                    session, adventure_id, "memory_cursor", after, through, (through, end_id)
                )
                session.add(
                    Memory(
                        adventure_id=adventure_id,
                        text=text,
                        origin=MemoryOrigin.STORY,
                        source_start=first,
                        source_end=last,
                    )
                )
                await session.flush()
                await enforce_capacity(session, adventure_id, self.capacity)
        except _Superseded:
            log.info("memory for adventure %s superseded; looking again", adventure_id)
            return LOOK_AGAIN
        return WROTE

    async def _rewrite_summary(self, provider: ChatProvider, adventure_id: int) -> str:
        async with self.db.session() as session:
            adventure = await session.get(Adventure, adventure_id)
            if adventure is None:
                return NOTHING
            positions = await line_positions(session, adventure.head_node_id)
            stretch = self.summary_cadence.due(positions.count, adventure.summary_cursor)
            if stretch is None:
                return NOTHING
            memories = await self._unfolded(session, adventure_id, positions, adventure)
            old_summary = adventure.story_summary
            banned = await banned_words(session, adventure, self.content)
        if not memories:
            return NOTHING  # nothing new to fold in yet: the memories come first
        after, through = stretch
        # The summary now covers every memory it folded, so the next one never folds one twice.
        through = max(through, positions.position_of(max(m.source_end for m in memories)))
        text = banned.mask(
            clean_summary(
                await self._ask(
                    provider,
                    summary_messages(old_summary, [m.text for m in memories]),
                    SUMMARY_PARAMS,
                )
            )
        )
        if not text:
            log.warning("the model wrote an empty summary for adventure %s", adventure_id)
            return NOTHING
        try:
            async with self.db.transaction() as session:
                await self._advance(
                    session,
                    adventure_id,
                    "summary_cursor",
                    after,
                    through,
                    summary=old_summary,
                    folded=[m.id for m in memories if m.id is not None],
                )
                await session.execute(
                    update(Adventure)
                    .where(col(Adventure.id) == adventure_id)
                    .values(story_summary=text)
                )
                session.add(SummaryVersion(adventure_id=adventure_id, text=text, through=through))
        except _Superseded:
            log.info("summary for adventure %s superseded; looking again", adventure_id)
            return LOOK_AGAIN
        return WROTE

    async def _unfolded(
        self,
        session: AsyncSession,
        adventure_id: int,
        positions: LinePositions,
        adventure: Adventure,
    ) -> list[Memory]:
        """The bank's memories the summary has not folded in yet, oldest first."""
        cursor = min(adventure.summary_cursor, positions.count)
        rows = await session.scalars(
            select(Memory)
            .where(
                col(Memory.adventure_id) == adventure_id,
                col(Memory.origin) == MemoryOrigin.STORY,
                col(Memory.source_end) > positions.index_of(cursor),
            )
            .order_by(col(Memory.source_end))
        )
        return list(rows)

    async def _advance(
        self,
        session: AsyncSession,
        adventure_id: int,
        cursor: str,
        expected: int,
        to: int,
        still_on_line: tuple[int, int] | None = None,
        *,
        summary: str | None = None,
        folded: Sequence[int] = (),
    ) -> None:
        """Move a cursor from ``expected`` to ``to``, or raise ``_Superseded``.

        The update comes first: it locks the adventure's row, so a head move (which updates it
        too) either finished before and is seen by the checks below, or waits for this
        transaction and then cuts back what it stored."""
        column = getattr(Adventure, cursor)
        condition = [col(Adventure.id) == adventure_id, column == expected]
        if summary is not None:
            condition.append(col(Adventure.story_summary) == summary)  # a player's edit wins
        moved = await rows_changed(
            session, update(Adventure).where(*condition).values({cursor: to})
        )
        if moved != 1:
            raise _Superseded
        if still_on_line is not None:
            position, node_id = still_on_line
            head = await session.scalar(
                select(col(Adventure.head_node_id)).where(col(Adventure.id) == adventure_id)
            )
            if (await line_positions(session, head)).id_at(position) != node_id:
                raise _Superseded
        if folded:
            present = await session.scalar(
                select(func.count()).select_from(Memory).where(col(Memory.id).in_(folded))
            )
            if present != len(folded):
                raise _Superseded  # a cut-back removed one: the summary would describe it

    async def _ask(
        self, provider: ChatProvider, messages: list[ChatMessage], params: GenerationParams
    ) -> str:
        return await whole_text(provider, messages, params)

    async def _embed(self, adventure_id: int) -> int:
        """Embed the adventure's live memories that have no vector from the configured model."""
        if self.embedder is None:
            return 0
        model = self.embedder.model
        done = 0
        while True:
            async with self.db.session() as session:
                rows = (
                    await session.execute(
                        select(col(Memory.id), col(Memory.text))
                        .where(
                            col(Memory.adventure_id) == adventure_id,
                            col(Memory.forgotten).is_(False),
                            or_(
                                col(Memory.embedding_model).is_(None),
                                col(Memory.embedding_model) != model,
                            ),
                        )
                        .order_by(col(Memory.id))
                        .limit(EMBED_BATCH)
                    )
                ).all()
            if not rows:
                return done
            vectors = await self.embedder.embed([row.text for row in rows])
            async with self.db.transaction() as session:
                for row, vector in zip(rows, vectors, strict=True):
                    data = to_bytes(vector)
                    # Only if the text is still the one embedded (an edit clears the vector).
                    await session.execute(
                        update(Memory)
                        .where(col(Memory.id) == row.id, col(Memory.text) == row.text)
                        .values(
                            embedding=data,
                            embedding_model=model,
                            embedding_dim=int(vector.shape[0]),
                            # What processes keeping vectors compare (retrieval.vectors).
                            embedding_digest=vector_digest(data),
                        )
                    )
            done += len(rows)
            if len(rows) < EMBED_BATCH:
                return done
