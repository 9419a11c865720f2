"""A turn's generate step: the scripts' hooks, the context, the model's stream, the referee.

It stores nothing (the commit does, at the end), except what a script that stops an action
changed: that is kept, as upstream keeps it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from engine.errors import ModelError
from engine.library.knowledge.prompt import canon_texts
from engine.library.scripting.hooks import ScriptStopped
from engine.llm.ceilings import Ceilings
from engine.llm.providers.base import ChatProvider, GenerationParams
from engine.llm.sampling import STOP_AT_PLAYER_ACTION, number, turn_stops
from engine.people.content import BannedWords, MaskedStream
from engine.platform.events import ProviderChunk, ReasoningDelta, StreamEnd, TextDelta, Usage
from engine.platform.sanitise import sanitise
from engine.prompt.cards import scan_text
from engine.prompt.held_block import LeftOut
from engine.prompt.inputs import BuiltContext, ContextBuilder, ContextInputs
from engine.prompt.tokens import tokens_in
from engine.storage.database import Database
from engine.storage.models import Adventure
from engine.story.chapters.turn import ChapterOutcome, ChapterTurn
from engine.story.claims import claims_in_scene
from engine.story.fallback import FALLBACK_MODEL
from engine.story.narration_hygiene import tidy_narration
from engine.story.narration_seams import Seams, seams_of
from engine.story.narrative.events import Outcome
from engine.story.narrative.turn import holds_story_block, settle_story
from engine.story.suggestions import (
    SUGGESTIONS_PART,
    Fit,
    fit_of,
    from_lists,
    suggestions_on,
)
from engine.story.versions import update_unmoved
from engine.story.world.apply import BlockHolder, SettledWorld, schema_of, settle
from engine.story.world.parser import extract_state
from engine.turns.events import TurnEvent
from engine.turns.moderation import Moderator
from engine.turns.plan import Fence, TurnPlan

T = TypeVar("T")


def params_for(
    adventure: Adventure, defaults: GenerationParams, ceilings: Ceilings | None = None
) -> GenerationParams:
    """The operator's generation settings with the adventure's own on top, the reply's length
    held to ``ceilings`` (the operator's, on the operator's model). The adventure's stop
    strings come after Campfire's own, which a server taking only a few is sent first."""
    max_tokens = adventure.max_output_tokens or defaults.max_tokens
    if ceilings is not None:
        max_tokens = min(max_tokens, ceilings.max_output_tokens)
    return GenerationParams(
        max_tokens=max_tokens,
        temperature=_or(adventure.temperature, defaults.temperature),
        top_p=_or(adventure.top_p, defaults.top_p),
        min_p=_or(adventure.min_p, defaults.min_p),
        repetition_penalty=_or(adventure.repetition_penalty, defaults.repetition_penalty),
        presence_penalty=_or(adventure.presence_penalty, defaults.presence_penalty),
        frequency_penalty=_or(adventure.frequency_penalty, defaults.frequency_penalty),
        stop=turn_stops(adventure.stop_strings, defaults.stop or STOP_AT_PLAYER_ACTION),
    )


def _or(value: T | None, default: T) -> T:
    return default if value is None else value


#: The most of a reasoning trace kept with a turn (its start: how the model set out).
MAX_STORED_REASONING_CHARS = 32_000


@dataclass
class Reply:
    """A streamed reply as it accumulates."""

    pieces: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    usage: Usage | None = None
    first_token_ms: int | None = None
    latency_ms: int = 0

    @property
    def text(self) -> str:
        return "".join(self.pieces).rstrip()


@dataclass(frozen=True, slots=True)
class Draft:
    """A generated turn, ready for the commit."""

    #: The plan's actions as the scripts' onInput left them, in the plan's order.
    action_texts: tuple[str, ...]
    #: The action the narration answers, as the players were shown it was accepted.
    action_text: str
    built: BuiltContext
    reply: Reply
    #: The reply's prose, and the world state its state block leaves after the referee.
    world: SettledWorld
    #: The provider's label.
    model: str
    #: The memories the context chose: the commit counts their use.
    memory_ids: tuple[int, ...] = ()
    #: What the turn did to the adventure's chapters (engine.story.chapters).
    chapters: ChapterOutcome = ChapterOutcome()
    #: The narrative state the reply's events leave (None: the adventure does not track it).
    story: Outcome | None = None
    #: The suggested actions the reply offered, validated (``engine.story.suggestions``).
    suggestions: tuple[str, ...] = ()
    #: Why an authored line stands in for the model's (``engine.story.fallback``); "" if none does.
    fallback_reason: str = ""
    #: Whether the model writes suggestions, after this reply (None: not counted this turn).
    fit: Fit | None = None

    @property
    def reasoning(self) -> str:
        # Stored with the turn for Insights' Reasoning view, bounded whatever the model's
        # reply limit (CAMPFIRE_MODEL_REPLY_CHARS may allow far more).
        return sanitise("".join(self.reply.reasoning)).strip()[:MAX_STORED_REASONING_CHARS]


class Generation:
    """One turn's generate step, in two parts: ``prepare`` reads what the context needs, in the
    session the plan was read in; ``narrate`` builds the context and streams the reply, holding
    no connection while the model writes."""

    def __init__(
        self,
        plan: TurnPlan,
        *,
        db: Database,
        provider: ChatProvider,
        params: GenerationParams,
        context: ContextBuilder,
        fence: Fence | None,
        ceilings: Ceilings | None = None,
        moderator: Moderator | None = None,
    ) -> None:
        """``ceilings``: the operator's, when the turn is on the operator's model;
        ``moderator``: the operator's check of what the model writes."""
        self.moderator = moderator or Moderator()
        self.plan = plan
        self.ceilings = ceilings
        self.db = db
        self.provider = provider
        self.params = params
        self.context = context
        self.fence = fence
        self._action_texts: tuple[str, ...] = ()
        self._answered = ""
        self._inputs: ContextInputs | None = None
        self._draft: Draft | None = None
        self._chapters: ChapterTurn | None = None
        self._built: BuiltContext | None = None
        #: Whether the adventure offers suggested actions (asked for in the block).
        self._suggest = False
        #: Whether its model writes them (``engine.story.suggestions.fit``), when it offers them.
        self._fit: Fit | None = None
        #: What the tidying of the narration reads of the prompt (``narration_seams``).
        self._seams = Seams()
        #: The words banned where the adventure runs: masked in what the model writes.
        self._banned = BannedWords()

    async def prepare(self, session: AsyncSession) -> str:
        """Run onInput on the actions to write and gather the context's inputs; returns the
        action the narration answers."""
        plan, scripts = self.plan, self.plan.scripts
        texts = []
        for planned in plan.actions:
            text = planned.text
            if scripts is not None:
                # onInput runs before anything is stored. Continue has no input and skips it;
                # a retry does not run it again: its action was played once, and is not
                # written again.
                text = await self._hook(scripts.on_input(text, planned.action.type))
            texts.append(text)
        self._action_texts = tuple(texts)
        # A round's actions are answered together, as one passage; one its script emptied is
        # dropped (a continue when none is left).
        self._answered = (
            plan.replaces.action_text if plan.replaces else "\n".join(t for t in texts if t)
        )
        inputs = await self.context.gather(
            session,
            plan.adventure,
            self._answered,
            script_state=scripts.state if scripts else None,
        )
        if scripts is not None:
            inputs = replace(inputs, cards=scripts.context_cards())
        if self.ceilings is not None:
            budget, output, clamped = self.ceilings.clamp(inputs.budget, inputs.max_output_tokens)
            inputs = replace(inputs, budget=budget, max_output_tokens=output, clamped=clamped)
        self._chapters = await ChapterTurn.load(session, plan.adventure)
        if self._chapters is not None:
            inputs = self._chapters.context(inputs)
        self._suggest = await suggestions_on(session, plan.adventure)
        # What players told the characters in the scene, quoted as theirs (engine.story.claims).
        scene = scan_text([entry.text for entry in inputs.history], self._answered)
        claims = await claims_in_scene(session, plan.adventure, inputs.cards, scene)
        if claims:
            inputs = replace(inputs, claims=claims)
        if self._suggest:
            assert plan.adventure.id is not None
            self._fit = await fit_of(session, plan.adventure.id, self.provider.label)
            if self._fit.asked:
                inputs = replace(inputs, block_parts=(*inputs.block_parts, SUGGESTIONS_PART))
            else:
                left_out = LeftOut(SUGGESTIONS_PART, self._fit.reason)
                inputs = replace(inputs, block_left_out=(*inputs.block_left_out, left_out))
        self._seams = seams_of(inputs)
        self._banned = BannedWords.of(inputs.banned)
        # The model is told them too, where it can be: their tokens banned (logit bias).
        self.params = replace(self.params, avoid=self._banned.words)
        self._inputs = inputs
        return self._answered

    def built(self) -> BuiltContext:
        """The context as ``narrate`` builds it, before the scripts' hook (prepare first)."""
        assert self._inputs is not None, "prepare first"
        return self.context.build(self._inputs)

    async def check_actions(self) -> None:
        """The operator's moderation check of the actions this turn writes (as the scripts'
        onInput left them), before they are shown or stored."""
        assert self._inputs is not None, "prepare first"
        if self.moderator and self.plan.replaces is None:
            await self.moderator.check_action(self._answered, self._inputs.content_rating)

    async def narrate(self) -> AsyncGenerator[TurnEvent, None]:
        """The context built and sent, the reply as events, the reply's state refereed."""
        assert self._inputs is not None, "prepare first"
        plan, scripts = self.plan, self.plan.scripts
        adventure = plan.adventure
        built = self.context.build(self._inputs)
        if scripts is not None:
            built = await self._hook(scripts.rewrite_context(built))
        self._built = built
        # What the model is sent of the sampling settings, and what its server does not take.
        sampling = self.params.sampling(self.provider.dialect)
        built.report.sampling = [f"temperature {number(self.params.temperature)}", *sampling.sent]
        built.report.sampling_left_out = list(sampling.left_out)
        # The state block after the prose is the engine's, not the players': held back.
        # Without a schema, the block is still the engine's when chapters, the narrative
        # state or suggested actions read it.
        hold = holds_story_block(adventure) or self._chapters is not None or self._suggest
        holder = BlockHolder() if schema_of(adventure.stat_schema) or hold else None
        masked = self._banned.stream() if self._banned else None
        reply = Reply()
        async with aclosing(self._stream(built, holder, reply, masked)) as deltas:
            async for event in deltas:
                yield event
        kept = await self._written(built, reply, hold)
        retried = False
        if self._banned.found(kept.world.prose) is not None:
            reply, kept = await self._written_again(built, reply, kept, hold)
            retried = True
        output, world = kept.output, kept.world
        if self._chapters is not None:
            world = self._chapters.settle(world, output, turn_index=plan.index, report=built.report)
        offered = from_lists(extract_state(output).lists) if self._suggest else ()
        offered = tuple(text for text in offered if self._banned.found(text) is None)
        if self._banned:
            # The model's and the scripts' words alike: no banned word enters the story.
            masked_prose = self._banned.mask(world.prose)
            # After a retry, its own line in Insights says what was masked.
            if masked_prose != world.prose and not retried:
                built.report.checks.append("banned words in the narration were masked")
            world = replace(world, prose=masked_prose)
        if self.moderator:
            # Nothing is stored yet: a refused narration fails the turn, with Retry.
            await self.moderator.check_narration(world.prose, self._inputs.content_rating)
            built.report.checks.append("the narration passed the moderation check")
        self._draft = Draft(
            action_texts=self._action_texts,
            action_text=self._answered,
            built=built,
            reply=reply,
            world=world,
            model=self.provider.label,
            memory_ids=self._inputs.memory_ids,
            chapters=self._chapters.outcome if self._chapters else ChapterOutcome(),
            # Canon outranks the narration: the facts this turn's Canon passages state.
            story=settle_story(
                adventure.story_state,
                world.story,
                tracking=adventure.story_tracking,
                canon=canon_texts(self._inputs.knowledge),
            ),
            suggestions=offered,
            fit=self._fit.after(bool(offered)) if self._fit else None,
        )

    def fallback_draft(self, line: str, reason: str) -> Draft:
        """A turn whose narration is an authored line, the model having failed
        (``engine.story.fallback``): the world state as it was, no suggestions."""
        assert self._inputs is not None, "prepare first"
        adventure = self.plan.adventure
        built = self._built or self.context.build(self._inputs)
        self._draft = Draft(
            action_texts=self._action_texts,
            action_text=self._answered,
            built=built,
            reply=Reply(pieces=[line]),
            world=settle(
                adventure.stat_schema, adventure.world_state, line, turn_index=self.plan.index
            ),
            model=FALLBACK_MODEL,
            memory_ids=self._inputs.memory_ids,
            fallback_reason=reason,
        )
        return self._draft

    def draft(self) -> Draft:
        assert self._draft is not None, "narrate first"
        return self._draft

    async def _written(self, built: BuiltContext, reply: Reply, hold: bool) -> _Written:
        """A reply into the story: the scripts' onOutput, sanitised, its state block taken out
        and refereed, the model's own prose tidied. Run on each reply the turn asked for."""
        plan, scripts = self.plan, self.plan.scripts
        adventure = plan.adventure
        output = written = reply.text
        if scripts is not None:
            # onOutput needs the whole reply, so it runs after the stream: players watched the
            # model's text arrive, and the final edit (TurnDone's text) shows the script's.
            output = await scripts.on_output(output)
            built.report.scripts = scripts.report_json()
        # The model's words enter the story here: an endpoint may send anything (NUL, a lone
        # surrogate), so they are sanitised as a player's are.
        output = sanitise(output)
        world = settle(
            adventure.stat_schema, adventure.world_state, output, turn_index=plan.index, hold=hold
        )
        if output == sanitise(written):
            # The model's own prose (a script's output is the script's to shape): what is not
            # story goes (engine.story.narration_hygiene).
            world = replace(world, prose=tidy_narration(world.prose, self._seams))
        return _Written(output, world)

    async def _written_again(
        self, built: BuiltContext, first: Reply, written: _Written, hold: bool
    ) -> tuple[Reply, _Written]:
        """A narration that holds a banned word (a bias, where the model took one, bans only
        one-token words) is asked for once more, with the same messages. Not streamed: the
        players watched the first, masked, and the turn's final edit shows the text kept.

        The second reply is kept, masked if it holds one too: the scripts' onOutput ran on it
        last, so their state goes with its text, and its state block is the one the turn
        settles. When the model fails to answer again, the first is kept, masked: the turn
        does not fail for a word a mask covers. Both calls are counted (``_stream``)."""
        second = Reply()
        try:
            async with aclosing(self._stream(built, None, second)) as deltas:
                async for _ in deltas:
                    pass
        except ModelError as error:
            built.report.checks.append(
                "a banned word in the narration: writing it again failed "
                f"({error.__class__.__name__}), so the first reply was masked"
            )
            return first, written
        again = await self._written(built, second, hold)
        built.report.checks.append(
            "a banned word in the narration: written again once, the second reply had none"
            if self._banned.found(again.world.prose) is None
            else "a banned word in the narration: still there after one retry, masked"
        )
        # The turn's timings: the players' wait for the first words, and both calls.
        second.first_token_ms = first.first_token_ms
        second.latency_ms += first.latency_ms
        return second, again

    async def _stream(
        self,
        built: BuiltContext,
        holder: BlockHolder | None,
        reply: Reply,
        masked: MaskedStream | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """The model's reply as events, collected into ``reply`` as it streams; what the call
        cost told to the fence as it ends, however it ends (each call of a turn: the fence
        adds them up)."""
        started = time.perf_counter()
        answered = False
        try:
            async with aclosing(self.provider.stream(built.messages, self.params)) as chunks:
                async for chunk in chunks:
                    answered = True
                    event = self._take(chunk, holder, reply, started, masked)
                    if event is not None:
                        yield event
        finally:
            if self.fence is not None and self.fence.spent is not None:
                self.fence.spent(_cost(built, reply) if answered else None)
        reply.latency_ms = _ms_since(started)

    @staticmethod
    def _take(
        chunk: ProviderChunk,
        holder: BlockHolder | None,
        reply: Reply,
        started: float,
        masked: MaskedStream | None = None,
    ) -> TurnEvent | None:
        """One piece of the model's reply into ``reply``; the event it shows, if any."""
        if isinstance(chunk, TextDelta):
            piece = chunk.text if reply.pieces else chunk.text.lstrip()
            if not piece:
                return None
            if reply.first_token_ms is None:
                reply.first_token_ms = _ms_since(started)
            reply.pieces.append(piece)
            visible = holder.feed(piece) if holder else piece
            if masked is not None:
                visible = masked.feed(visible)
            return TextDelta(visible) if visible else None
        if isinstance(chunk, ReasoningDelta):
            reply.reasoning.append(chunk.text)
            return chunk
        if isinstance(chunk, StreamEnd):
            reply.usage = chunk.usage
        return None

    async def _hook(self, step: Awaitable[T]) -> T:
        """Run a hook; when a script stops the turn, keep what the scripts changed and stop.

        A stopped turn stores no story, but a script that stops an action (a command such as
        "/roll") expects its state, cards and message to stick, as upstream. A stopped retry
        keeps nothing: its scripts ran on the state its turn first saw, and the live take
        stays, with its own.
        """
        try:
            return await step
        except ScriptStopped:
            if self.plan.replaces is None:
                await self._keep_stopped_scripts()
            raise

    async def _keep_stopped_scripts(self) -> None:
        scripts, adventure = self.plan.scripts, self.plan.adventure
        assert scripts is not None and adventure.id is not None
        async with self.db.transaction() as session:
            if self.fence is not None and not await self.fence.holds(session):
                return
            if await update_unmoved(
                session, adventure.id, adventure.version, script_state=scripts.saved_state()
            ):
                await scripts.save(session)


@dataclass(frozen=True, slots=True)
class _Written:
    """A reply as it enters the story: the text after the scripts' onOutput, sanitised, and
    the world it settles (the prose without its state block)."""

    output: str
    world: SettledWorld


def _cost(built: BuiltContext, reply: Reply) -> Usage:
    """What a model call cost: the provider's count when it gave one; else Campfire's own, the
    prompt as it was counted when built and what came back (a reply broken off included)."""
    if reply.usage is not None:
        return reply.usage
    return Usage(built.report.used, tokens_in(reply.text + "".join(reply.reasoning)))


def _ms_since(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
