"""The turn engine: play, continue and retry, each a plan run through one pipeline.

    plan      what the turn answers and writes, and where (``engine.turns.plan``)
    generate  the scripts' hooks, the context, the model's stream, the referee
    commit    everything stored in one transaction, guarded by the adventure's version

Nothing is written until the whole reply has arrived. A failure anywhere before that (the
model, a cancelled stream, a concurrent change) leaves the adventure exactly as it was, and the
players are told what happened.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing

from sqlalchemy.ext.asyncio import AsyncSession

from engine.errors import CampfireError, DatabaseBusy, InternalError, ModelError, log_incident
from engine.library.scripting.sandbox import Limits
from engine.llm.ceilings import Ceilings
from engine.llm.providers.base import ChatProvider, GenerationParams
from engine.llm.providers.resolver import ProviderResolver
from engine.people.content import BannedWords, banned_words
from engine.people.limits import UsageLimits
from engine.prompt.card_cap import DEFAULT_MAX_CARDS
from engine.prompt.inputs import ContextBuilder
from engine.storage.database import Database
from engine.storage.dialect import is_busy
from engine.story.actions import PlayerAction
from engine.story.background_spend import MeteredProvider, charge_of
from engine.story.chapters.progress import ChapterEnd
from engine.story.chapters.recaps import write_recap
from engine.story.fallback import choose_line, fallback_lines
from engine.turns.commit import commit
from engine.turns.context import ContextEngine
from engine.turns.events import ActionAccepted, TurnDone, TurnEvent, TurnFailed
from engine.turns.generate import Generation, params_for
from engine.turns.moderation import Moderator
from engine.turns.plan import Fence, TurnPlan, plan_take, plan_turn
from engine.turns.result import TurnResult

log = logging.getLogger(__name__)


#: Turns one process runs at once; the rest wait for a slot, their turn leases heartbeated by
#: their holders meanwhile. Each running turn needs a database connection now and then, and
#: under overload (a thousand adventures on one process in the cluster trial) unbounded turns
#: waited past the pool's 30 s for one and failed; bounded, they queue and play. Well above
#: what Discord's global limit lets one bot show (about ten turns a second), so it costs no
#: throughput.
MAX_RUNNING_TURNS = 24


class TurnEngine:
    def __init__(
        self,
        db: Database,
        providers: ProviderResolver,
        *,
        params: GenerationParams | None = None,
        context: ContextBuilder | None = None,
        max_action_chars: int = 2000,
        script_limits: Limits | None = None,
        max_story_cards: int = DEFAULT_MAX_CARDS,
        max_running: int = MAX_RUNNING_TURNS,
        limits: UsageLimits | None = None,
        moderator: Moderator | None = None,
    ) -> None:
        """``limits``: the operator's budget, which a chapter's recap on the operator's model
        is counted against (None: not counted)."""
        self.db = db
        self.limits = limits
        #: The operator's moderation check of narrations (checks nothing when unset).
        self.moderator = moderator or Moderator()
        # Per process (engine.platform.coordination.per_process): turns beyond it wait their turn
        # here, holding no connection.
        self._slots = asyncio.Semaphore(max_running)
        self.providers = providers
        self.params = params or GenerationParams()
        self.context = context or ContextEngine(max_output_tokens=self.params.max_tokens)
        self.max_action_chars = max_action_chars
        self.script_limits = script_limits or Limits()
        self.max_story_cards = max_story_cards
        #: The adventure whose turn this process ran last: the one the narrating model's cache
        #: holds, if it keeps one (``read_ahead``). Per process, as that cache is.
        self._last_played: int | None = None

    async def read_ahead(self, adventure_id: int) -> bool:
        """Have the narrating model read the adventure's next prompt ahead, where it can
        (``LocalLlamaProvider.read_ahead``, the embedded model); whether it was asked.

        Called after each turn, and again when the memory bank rewrote the story summary
        between turns: the summary goes before the story, and the story window's start steps
        now and then, so the next turn would read the whole story again. The context is the one
        a continue would send, built as a turn builds it, read in the player's pause; the next
        turn's prompt begins the same up to the story's end. Only for the adventure
        played last in this process (its story is what the model holds; reading another's
        would cost that one its turn), and not for one with scripts (their hook rewrites the
        context as it is sent, and runs only for a real turn). Never raises: it only saves
        time.
        """
        if adventure_id != self._last_played:
            return False
        try:
            return await self._read_ahead(adventure_id)
        except Exception:
            log.warning("could not read ahead for adventure %s", adventure_id, exc_info=True)
            return False

    async def _read_ahead(self, adventure_id: int) -> bool:
        async with self.db.session() as session:
            plan = await plan_turn(
                session,
                adventure_id,
                (),
                max_action_chars=self.max_action_chars,
                script_limits=self.script_limits,
                max_story_cards=self.max_story_cards,
            )
            if plan.scripts is not None:
                return False
            await self.providers.read(session, plan.adventure)
            provider = self.providers.for_adventure(plan.adventure)
            read_ahead = getattr(provider, "read_ahead", None)
            if read_ahead is None:
                return False
            operator = self.providers.is_operator_default(plan.adventure)
            ceilings = self.ceilings() if operator else None
            generation = Generation(
                plan,
                db=self.db,
                provider=provider,
                params=params_for(plan.adventure, self.params, ceilings),
                context=self.context,
                fence=None,
                ceilings=ceilings,
            )
            await generation.prepare(session)
        await read_ahead(generation.built().messages)
        return True

    def ceilings(self) -> Ceilings:
        """The operator's: the context and reply length it configured for its model (read
        each turn: a benchmark or the console may set another context engine)."""
        return Ceilings(
            context_tokens=self.context.budget,
            max_output_tokens=self.params.max_tokens,
        )

    def play(
        self, adventure_id: int, action: PlayerAction, *, fence: Fence | None = None
    ) -> AsyncGenerator[TurnEvent, None]:
        """Run one turn, yielding events. Ends with ``TurnDone`` or ``TurnFailed``.

        ``fence`` is checked inside the final transaction: when it answers False (the turn's
        lease passed to another process), nothing is stored.
        """
        return self.play_actions(adventure_id, (action,), fence=fence)

    def play_actions(
        self, adventure_id: int, actions: Sequence[PlayerAction], *, fence: Fence | None = None
    ) -> AsyncGenerator[TurnEvent, None]:
        """Like ``play``, for several players' actions at once: each is written, in order, and
        one narration answers them all."""

        async def planned(session: AsyncSession) -> TurnPlan:
            return await plan_turn(
                session,
                adventure_id,
                actions,
                max_action_chars=self.max_action_chars,
                script_limits=self.script_limits,
                max_story_cards=self.max_story_cards,
            )

        return _ending_in_failure(
            self._run(planned, fence), f"turn failed (adventure {adventure_id})"
        )

    def retry(
        self, adventure_id: int, *, node_id: int | None = None, fence: Fence | None = None
    ) -> AsyncGenerator[TurnEvent, None]:
        """Write the newest narrator turn again, as another take. Ends with ``TurnDone`` or
        ``TurnFailed``.

        The new take, its state and the head are written in one version-guarded transaction at
        the end: if the regeneration fails, nothing was written and the previous take is still
        live, with its state. ``node_id``: the turn the player asked to retry, refused when a
        newer one has arrived since.
        """

        async def planned(session: AsyncSession) -> TurnPlan:
            return await plan_take(
                session,
                adventure_id,
                node_id,
                script_limits=self.script_limits,
                max_story_cards=self.max_story_cards,
            )

        return _ending_in_failure(
            self._run(planned, fence), f"retry failed (adventure {adventure_id})"
        )

    async def _run(
        self, planned: Callable[[AsyncSession], Awaitable[TurnPlan]], fence: Fence | None
    ) -> AsyncGenerator[TurnEvent, None]:
        """One turn through the pipeline: the plan and the context's reads in one session, then
        the reply (holding no connection), then the commit. At most ``max_running`` at once in
        this process (see ``MAX_RUNNING_TURNS``)."""
        async with self._slots:
            async with aclosing(self._pipeline(planned, fence)) as events:
                async for event in events:
                    yield event

    async def _pipeline(
        self, planned: Callable[[AsyncSession], Awaitable[TurnPlan]], fence: Fence | None
    ) -> AsyncGenerator[TurnEvent, None]:
        async with self.db.session() as session:
            plan = await planned(session)
            self._last_played = plan.adventure.id
            # The words banned where the adventure runs, read by the context's own policy as
            # the narration's are (the Generation keeps its copy to itself): masked in what
            # the scripts write to cards and say, and in the chapter's recap.
            banned = await banned_words(session, plan.adventure, self.context.content)
            if plan.scripts is not None:
                plan.scripts.banned = banned
            # Which model (the player's, the server's, the operator's), read in this session.
            await self.providers.read(session, plan.adventure)
            # On the operator's model, the adventure's settings are held to the operator's.
            ceilings = (
                self.ceilings() if self.providers.is_operator_default(plan.adventure) else None
            )
            generation = Generation(
                plan,
                db=self.db,
                provider=self.providers.for_adventure(plan.adventure),
                params=params_for(plan.adventure, self.params, ceilings),
                context=self.context,
                fence=fence,
                ceilings=ceilings,
                moderator=self.moderator,
            )
            answered = await generation.prepare(session)
            # Read now, while a session is open: the lines an author wrote for a failed turn.
            lines = await fallback_lines(session, plan.adventure)
        # Outside the session: a checker's answer may take seconds.
        await generation.check_actions()
        yield ActionAccepted(answered)
        try:
            # aclosing at each layer: an abandoned turn closes the model stream now.
            async with aclosing(generation.narrate()) as events:
                async for event in events:
                    yield event
        except ModelError as error:
            if not lines or plan.replaces is not None:
                # A retry that fails keeps the take it would have replaced: the scene goes on.
                raise
            # The scene goes on with the author's line (engine.story.fallback); no model is asked.
            log.info(
                "adventure %s: the model failed (%s); an authored line stands in",
                plan.adventure.id,
                error.__class__.__name__,
            )
            generation.fallback_draft(choose_line(lines, plan.index), error.message)
        result = await commit(self.db, plan, generation.draft(), fence)
        ended = generation.draft().chapters.end
        if ended is not None:
            # The turn is stored; its chapter's recap is written before it is shown as done
            # (one short call), and never fails the turn.
            await self._recap(generation, result, ended, banned)
        yield TurnDone(result)

    async def _recap(
        self,
        generation: Generation,
        result: TurnResult,
        ended: ChapterEnd,
        banned: BannedWords,
    ) -> None:
        provider: ChatProvider = generation.provider
        adventure = generation.plan.adventure
        if self.limits is not None and self.providers.is_operator_default(adventure):
            # Work the players did not ask for, counted against the budget as a memory is.
            provider = MeteredProvider(provider, self.limits, charge_of(adventure))
        try:
            await write_recap(
                self.db,
                provider,
                adventure_id=result.adventure_id,
                node_id=result.narrator_node_id,
                take=result.take,
                end=ended,
                banned=banned,
            )
        except Exception as error:  # noqa: BLE001 - the stored turn stands without its recap
            log_incident(f"chapter recap failed (adventure {result.adventure_id})", error)


async def _ending_in_failure(
    turn: AsyncGenerator[TurnEvent, None], failure: str
) -> AsyncGenerator[TurnEvent, None]:
    """A turn's events, where an error ends the stream as ``TurnFailed`` instead of raising:
    the player's message for a ``CampfireError``, an incident reference for anything else."""
    try:
        async with aclosing(turn) as events:
            async for event in events:
                yield event
    except CampfireError as error:
        yield TurnFailed(error)
    except Exception as error:
        if is_busy(error):
            # Not Campfire's fault and no traceback worth keeping: another writer held the lock.
            log.warning("%s: the database stayed locked (%s)", failure, error.__class__.__name__)
            yield TurnFailed(DatabaseBusy())
        else:
            yield TurnFailed(InternalError(log_incident(failure, error)))
