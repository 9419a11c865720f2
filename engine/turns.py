"""The turn loop: a player's action in, the narrator's reply streamed out, the turn stored.

Nothing is written until the whole reply has arrived: the action and the reply are stored in
one transaction at the end, guarded by the adventure's version. A failure anywhere before that
(the model, a cancelled stream, a concurrent change) leaves the adventure exactly as it was, and
the player is told what happened.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import TypeVar

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from engine.accounts import touch_user
from engine.actions import PlayerAction, format_action
from engine.context import BuiltContext, ContextBuilder, ContextEngine, HistoryEntry
from engine.errors import CampfireError, InternalError, NotFound, StoryMovedOn, log_incident
from engine.events import (
    ActionAccepted,
    ReasoningDelta,
    StreamEnd,
    TextDelta,
    TurnDone,
    TurnEvent,
    TurnFailed,
    Usage,
)
from engine.memory.cursors import story_cut_back
from engine.providers.base import ChatProvider, GenerationParams
from engine.providers.resolver import ProviderResolver
from engine.scripting.hooks import ScriptStopped, TurnScripts
from engine.scripting.sandbox import Limits
from engine.snapshots import capture, load_cards, restore
from engine.storage.database import Database
from engine.storage.models import (
    ActionType,
    Adventure,
    Role,
    StoryNode,
    utcnow,
)
from engine.story_tree.lines import advance_line, fork_beside, has_children
from engine.story_tree.takes import RetryPlan, add_take, plan_retry
from engine.tokens import count_tokens
from engine.world_state.apply import BlockHolder, SettledWorld, schema_of, settle

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A check run inside the turn's final transaction; False means "do not store".
Fence = Callable[[AsyncSession], Awaitable[bool]]

#: The narrator stops where it would start writing the player's next action for them.
STOP_AT_PLAYER_ACTION = ("\n>",)


@dataclass(frozen=True, slots=True)
class TurnResult:
    adventure_id: int
    version: int
    action_node_id: int | None
    narrator_node_id: int
    action_text: str
    text: str
    reasoning: str
    model: str
    usage: Usage | None
    latency_ms: int
    first_token_ms: int | None
    #: What the turn changed in the world state, in a line ("hp 100 → 85 (hurt) · …").
    state_chip: str = ""
    #: Which take of the turn this is, of how many (a retry adds one).
    take: int = 1
    take_count: int = 1
    #: A retry that could not replace its turn in place (later turns follow it) wrote this
    #: new turn beside it on a branch of its own; the replaced turn's node.
    replaced_node_id: int | None = None
    #: What the adventure's scripts set in ``state.message``, shown under the turn.
    script_message: str = ""


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
        max_story_cards: int = 500,
    ) -> None:
        self.db = db
        self.providers = providers
        self.params = params or GenerationParams()
        self.context = context or ContextEngine(max_output_tokens=self.params.max_tokens)
        self.max_action_chars = max_action_chars
        self.script_limits = script_limits or Limits()
        self.max_story_cards = max_story_cards

    async def play(
        self, adventure_id: int, action: PlayerAction, *, fence: Fence | None = None
    ) -> AsyncIterator[TurnEvent]:
        """Run one turn, yielding events. Ends with ``TurnDone`` or ``TurnFailed``.

        ``fence`` is checked inside the final transaction: when it answers False (the turn's
        lease passed to another process), nothing is stored.
        """
        failure = f"turn failed (adventure {adventure_id})"
        # aclosing at each layer: an abandoned turn closes the model stream now.
        async with aclosing(
            _ending_in_failure(self._play(adventure_id, action, fence), failure)
        ) as events:
            async for event in events:
                yield event

    async def _play(
        self, adventure_id: int, action: PlayerAction, fence: Fence | None
    ) -> AsyncIterator[TurnEvent]:
        action_text = format_action(action, max_chars=self.max_action_chars)
        async with self.db.session() as session:
            adventure = await session.get(Adventure, adventure_id)
            if adventure is None or adventure.ended_at is not None:
                raise NotFound("There is no adventure running here. Start one with /start.")
            if adventure.head_node_id is None:
                raise NotFound("This adventure has no story yet.")
            scripts = await TurnScripts.load(
                session,
                adventure,
                actor=action.actor,
                limits=self.script_limits,
                max_cards=self.max_story_cards,
            )
            if scripts is not None and action_text:
                # onInput runs before anything is stored; Continue has no input and skips it.
                action_text = await self._scripted(
                    scripts, adventure, fence, scripts.on_input(action_text, action.type)
                )
            inputs = await self.context.gather(
                session, adventure, action_text, script_state=scripts.state if scripts else None
            )
            if scripts is not None:
                inputs = replace(inputs, cards=scripts.context_cards())
        head = inputs.head
        if head is None or head.id is None:
            raise NotFound("This adventure has no story yet.")
        yield ActionAccepted(action_text)

        built = self.context.build(inputs)
        if scripts is not None:
            built = await self._scripted(scripts, adventure, fence, scripts.rewrite_context(built))
        # The state block after the prose is the engine's, not the players': held back.
        holder = BlockHolder() if schema_of(adventure.stat_schema) else None
        reply = _Reply()
        provider = self.providers.for_adventure(adventure)
        async with aclosing(
            self._stream_reply(provider, built, self._params_for(adventure), holder, reply)
        ) as deltas:
            async for event in deltas:
                yield event
        output = reply.text
        if scripts is not None:
            # onOutput needs the whole reply, so it runs after the stream: players watched the
            # model's text arrive, and the final edit (TurnDone's text) shows the script's.
            output = await scripts.on_output(output)
        # Cooldowns count turn indexes: a retry reuses its turn's index, so clocks stay put.
        narrator_index = head.index + (2 if action_text else 1)
        world = settle(
            adventure.stat_schema,
            adventure.world_state,
            output,
            turn_index=narrator_index,
        )

        result = await self._store(
            fence,
            adventure,
            head,
            action,
            action_text,
            built,
            world,
            scripts,
            model=provider.label,
            reasoning="".join(reply.reasoning).strip(),
            usage=reply.usage,
            latency_ms=reply.latency_ms,
            first_token_ms=reply.first_token_ms,
        )
        yield TurnDone(result)

    def _params_for(self, adventure: Adventure) -> GenerationParams:
        return GenerationParams(
            max_tokens=adventure.max_output_tokens or self.params.max_tokens,
            temperature=(
                adventure.temperature
                if adventure.temperature is not None
                else self.params.temperature
            ),
            top_p=self.params.top_p,
            stop=self.params.stop or STOP_AT_PLAYER_ACTION,
        )

    async def _store(
        self,
        fence: Fence | None,
        adventure: Adventure,
        head: HistoryEntry,
        action: PlayerAction,
        action_text: str,
        built: BuiltContext,
        world: SettledWorld,
        scripts: TurnScripts | None,
        *,
        model: str,
        reasoning: str,
        usage: Usage | None,
        latency_ms: int,
        first_token_ms: int | None,
    ) -> TurnResult:
        # With scripts the cards may change this turn, so undo must be able to put them back.
        state_before = capture(
            adventure.world_state, adventure.script_state, scripts.rows if scripts else None
        )
        report = built.report
        if scripts is not None:
            report.scripts = scripts.report_json()
        text = world.prose
        async with self.db.session() as session, session.begin():
            if fence is not None and not await fence(session):
                raise StoryMovedOn(
                    "This turn took too long and another one took its place, so it was not "
                    "saved. Look at the newest turn and try again."
                )
            if action.author_id is not None:
                await touch_user(session, action.author_id)
            parent = head
            action_node: StoryNode | None = None
            if action_text:
                action_node = StoryNode(
                    adventure_id=adventure.id,
                    parent_id=head.id,
                    index=head.index + 1,
                    role=Role.PLAYER,
                    action=action.type,
                    author_id=action.author_id,
                    text=action_text,
                    token_count=count_tokens(action_text),
                    state_before=state_before,
                )
                session.add(action_node)
                await session.flush()
                parent = action_node
            narrator = StoryNode(
                adventure_id=adventure.id,
                parent_id=parent.id,
                index=parent.index + 1,
                role=Role.NARRATOR,
                action=ActionType.CONTINUE,
                author_id=action.author_id if not action_text else None,
                text=text,
                token_count=count_tokens(text),
                model=model,
                prompt_tokens=usage.prompt_tokens if usage else built.tokens,
                completion_tokens=usage.completion_tokens if usage else None,
                latency_ms=latency_ms,
                reasoning=reasoning or None,
                prompt_snapshot=zlib.compress(built.snapshot()),
                context_report=report.to_json(),
                state_block=world.report.block if world.report else None,
                state_report=world.report.to_json() if world.report else None,
                state_before=None if action_node else state_before,
                state_after=capture(world.state, adventure.script_state),
            )
            session.add(narrator)
            await session.flush()
            # The version guard: if anyone moved the story while this reply was being written,
            # this updates nothing and the whole transaction (both nodes) is rolled back.
            moved = await session.execute(
                update(Adventure)
                .where(Adventure.id == adventure.id, Adventure.version == adventure.version)
                .values(
                    head_node_id=narrator.id,
                    version=Adventure.version + 1,
                    world_state=world.state,
                    updated_at=utcnow(),
                    **({"script_state": scripts.saved_state()} if scripts else {}),
                )
            )
            if moved.rowcount != 1:
                raise StoryMovedOn(
                    "The story moved on while this turn was being written, so it was not "
                    "saved. Look at the newest turn and try again."
                )
            if scripts is not None:
                await scripts.save(session)
                # The state the turn leaves, cards as the scripts left them, for redo.
                narrator.state_after = capture(
                    world.state, scripts.saved_state(), await load_cards(session, adventure.id)
                )
            # Extends the branch, or forks one when the head had been moved back.
            await advance_line(
                session,
                adventure,
                head_id=head.id,
                head_index=head.index,
                new_tip_id=narrator.id,
                head_state=state_before,
            )
        return TurnResult(
            adventure_id=adventure.id,
            version=adventure.version + 1,
            action_node_id=action_node.id if action_node else None,
            narrator_node_id=narrator.id,
            action_text=action_text,
            text=text,
            reasoning=reasoning,
            model=model,
            usage=usage,
            latency_ms=latency_ms,
            first_token_ms=first_token_ms,
            state_chip=world.chip,
            script_message=scripts.message if scripts else "",
        )

    # --- retry: another take of the newest turn ------------------------------------------------

    async def retry(
        self, adventure_id: int, *, node_id: int | None = None, fence: Fence | None = None
    ) -> AsyncIterator[TurnEvent]:
        """Write the newest narrator turn again, as another take. Ends with ``TurnDone`` or
        ``TurnFailed``.

        The adventure is rolled back to the turn's snapshot in memory only, and the context is
        built from the turn's parent, so the text being replaced is not in its own prompt. The
        new take, its state and the head are written in one version-guarded transaction at the
        end: if the regeneration fails, nothing was written and the previous take is still
        live, with its state.
        """
        failure = f"retry failed (adventure {adventure_id})"
        # aclosing at each layer: an abandoned turn closes the model stream now.
        async with aclosing(
            _ending_in_failure(self._retry(adventure_id, node_id, fence), failure)
        ) as events:
            async for event in events:
                yield event

    async def _retry(
        self, adventure_id: int, node_id: int | None, fence: Fence | None
    ) -> AsyncIterator[TurnEvent]:
        async with self.db.session() as session:
            adventure = await session.get(Adventure, adventure_id)
            if adventure is None or adventure.ended_at is not None:
                raise NotFound("There is no adventure running here. Start one with /start.")
            if node_id is not None and adventure.head_node_id != node_id:
                # Asked for while another turn was still being written: that one is newer.
                raise StoryMovedOn(
                    "The story moved on before the retry could start (a newer turn arrived), "
                    "so nothing was retried. Look at the newest turn first."
                )
            plan = await plan_retry(session, adventure)
            # A detached copy rolled back to the turn's snapshot: what the turn first saw.
            session.expunge(adventure)
            adventure.head_node_id = plan.context_head_id
            adventure.world_state = plan.snapshot.get("world_state") or {}
            adventure.script_state = plan.snapshot.get("script_state") or {}
            scripts = await TurnScripts.load(
                session, adventure, limits=self.script_limits, max_cards=self.max_story_cards
            )
            if scripts is not None and "cards" in plan.snapshot:
                # The cards as the turn first saw them, not as its replaced take left them.
                scripts.use_cards(plan.snapshot["cards"])
            inputs = await self.context.gather(
                session,
                adventure,
                plan.action_text,
                script_state=scripts.state if scripts else None,
            )
            if scripts is not None:
                inputs = replace(inputs, cards=scripts.context_cards())
        yield ActionAccepted(plan.action_text)

        # onInput is not run again: the action was played once and is not written again.
        built = self.context.build(inputs)
        if scripts is not None:
            built = await scripts.rewrite_context(built)
        holder = BlockHolder() if schema_of(adventure.stat_schema) else None
        reply = _Reply()
        provider = self.providers.for_adventure(adventure)
        async with aclosing(
            self._stream_reply(provider, built, self._params_for(adventure), holder, reply)
        ) as deltas:
            async for event in deltas:
                yield event
        output = await scripts.on_output(reply.text) if scripts is not None else reply.text
        # The turn's own index: cooldown clocks stay where the first take left them.
        world = settle(
            adventure.stat_schema, adventure.world_state, output, turn_index=plan.node_index
        )
        result = await self._store_take(
            fence, adventure, plan, built, world, reply, scripts, provider.label
        )
        yield TurnDone(result)

    async def _stream_reply(
        self,
        provider: ChatProvider,
        built: BuiltContext,
        params: GenerationParams,
        holder: BlockHolder | None,
        reply: _Reply,
    ) -> AsyncIterator[TurnEvent]:
        """The model's reply as events, collected into ``reply`` as it streams."""
        started = time.perf_counter()
        async with aclosing(provider.stream(built.messages, params)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, TextDelta):
                    piece = chunk.text if reply.pieces else chunk.text.lstrip()
                    if not piece:
                        continue
                    if reply.first_token_ms is None:
                        reply.first_token_ms = _ms_since(started)
                    reply.pieces.append(piece)
                    visible = holder.feed(piece) if holder else piece
                    if visible:
                        yield TextDelta(visible)
                elif isinstance(chunk, ReasoningDelta):
                    reply.reasoning.append(chunk.text)
                    yield chunk
                elif isinstance(chunk, StreamEnd):
                    reply.usage = chunk.usage
        reply.latency_ms = _ms_since(started)

    async def _store_take(
        self,
        fence: Fence | None,
        adventure: Adventure,
        plan: RetryPlan,
        built: BuiltContext,
        world: SettledWorld,
        reply: _Reply,
        scripts: TurnScripts | None,
        model: str,
    ) -> TurnResult:
        text = world.prose
        reasoning = "".join(reply.reasoning).strip() or None
        block = world.report.block if world.report else None
        report = world.report.to_json() if world.report else None
        if scripts is not None:
            built.report.scripts = scripts.report_json()
        script_state = scripts.saved_state() if scripts else adventure.script_state
        after = capture(world.state, script_state, plan.snapshot.get("cards"))
        measured = {
            "model": model,
            "prompt_tokens": reply.usage.prompt_tokens if reply.usage else built.tokens,
            "completion_tokens": reply.usage.completion_tokens if reply.usage else None,
            "latency_ms": reply.latency_ms,
            "prompt_snapshot": zlib.compress(built.snapshot()),
            "context_report": built.report.to_json(),
        }
        async with self.db.session() as session, session.begin():
            if fence is not None and not await fence(session):
                raise StoryMovedOn(
                    "This retry took too long and another turn took its place, so it was not "
                    "saved. Look at the newest turn and try again."
                )
            node = await session.get(StoryNode, plan.node_id)
            if node is None:
                raise StoryMovedOn("The turn being retried is gone; nothing was saved.")
            if scripts is not None:
                # Back to the cards the turn first saw, then the scripts' changes on top.
                await restore(session, adventure.id, plan.snapshot)
                await scripts.save(session)
                after = capture(world.state, script_state, await load_cards(session, adventure.id))
            replaced: int | None = None
            if await has_children(session, plan.node_id):
                # Later turns follow this one: the new version goes beside it, on a branch.
                fresh = StoryNode(
                    adventure_id=adventure.id,
                    parent_id=plan.parent_id,
                    index=node.index,
                    role=Role.NARRATOR,
                    action=ActionType.CONTINUE,
                    author_id=node.author_id,
                    text=text,
                    token_count=count_tokens(text),
                    reasoning=reasoning,
                    state_block=block,
                    state_report=report,
                    state_before=plan.snapshot if plan.parent_is_narrator else None,
                    state_after=after,
                    **measured,
                )
                session.add(fresh)
                await session.flush()
                replaced, node, take = node.id, fresh, 1
                await fork_beside(session, adventure, plan.node_id, fresh.id)
            else:
                take = await add_take(
                    session,
                    node,
                    text=text,
                    reasoning=reasoning,
                    snapshot=after,
                    block=block,
                    report=report,
                    extra=measured,
                )
            moved = await session.execute(
                update(Adventure)
                .where(Adventure.id == adventure.id, Adventure.version == adventure.version)
                .values(head_node_id=node.id, version=Adventure.version + 1, updated_at=utcnow())
            )
            if moved.rowcount != 1:
                raise StoryMovedOn(
                    "The story moved on while this turn was being written again, so it was not "
                    "saved. Look at the newest turn and try again."
                )
            if scripts is None:
                await restore(session, adventure.id, after)
            else:
                await session.execute(
                    update(Adventure)
                    .where(Adventure.id == adventure.id)
                    .values(world_state=world.state, script_state=script_state)
                )
            # The replaced text leaves the line: memories past the parent are cut back.
            await story_cut_back(session, adventure.id, kept_through=plan.node_index - 1)
        return TurnResult(
            adventure_id=adventure.id,
            version=adventure.version + 1,
            action_node_id=None,
            narrator_node_id=node.id,
            action_text=plan.action_text,
            text=text,
            reasoning=reasoning or "",
            model=model,
            usage=reply.usage,
            latency_ms=reply.latency_ms,
            first_token_ms=reply.first_token_ms,
            state_chip=world.chip,
            take=take,
            take_count=take,
            replaced_node_id=replaced,
            script_message=scripts.message if scripts else "",
        )

    async def _scripted(
        self,
        scripts: TurnScripts,
        adventure: Adventure,
        fence: Fence | None,
        step: Awaitable[T],
    ) -> T:
        """Run a hook; when a script stops the turn, keep what the scripts changed and stop.

        A stopped turn stores no story, but a script that stops an action (a command such as
        "/roll") expects its state, cards and message to stick, as upstream.
        """
        try:
            return await step
        except ScriptStopped:
            async with self.db.session() as session, session.begin():
                if fence is not None and not await fence(session):
                    raise
                kept = await session.execute(
                    update(Adventure)
                    .where(Adventure.id == adventure.id, Adventure.version == adventure.version)
                    .values(script_state=scripts.saved_state(), updated_at=utcnow())
                )
                if kept.rowcount == 1:
                    await scripts.save(session)
            raise


@dataclass
class _Reply:
    """A streamed reply as it accumulates."""

    pieces: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    usage: Usage | None = None
    first_token_ms: int | None = None
    latency_ms: int = 0

    @property
    def text(self) -> str:
        return "".join(self.pieces).rstrip()


async def _ending_in_failure(
    turn: AsyncIterator[TurnEvent], failure: str
) -> AsyncIterator[TurnEvent]:
    """A turn's events, where an error ends the stream as ``TurnFailed`` instead of raising:
    the player's message for a ``CampfireError``, an incident reference for anything else."""
    try:
        async with aclosing(turn) as events:
            async for event in events:
                yield event
    except CampfireError as error:
        yield TurnFailed(error)
    except Exception as error:
        yield TurnFailed(InternalError(log_incident(failure, error)))


def _ms_since(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
