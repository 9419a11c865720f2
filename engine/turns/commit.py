"""A turn's commit: what the plan and the generate step decided, stored in one transaction.

The transaction is guarded by the adventure's version: if anyone moved the story while the
reply was being written, nothing of the turn is kept, and the players are told.
"""

from __future__ import annotations

import zlib
from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from engine.errors import PlayerDeleted, StoryMovedOn
from engine.people.accounts import lock_users
from engine.prompt.tokens import count_tokens
from engine.storage.database import Database
from engine.storage.models import ActionType, Role, StoryNode
from engine.story.claims import keep_claims
from engine.story.line.positions import story_cut_back
from engine.story.line.read import has_children, stored_state_before
from engine.story.line.write import advance_line, fork_beside
from engine.story.memory.bank import count_use
from engine.story.narrative.events import BY_MODEL
from engine.story.narrative.log import TurnCause, record
from engine.story.snapshots import capture, keep_state_after, load_cards, restore
from engine.story.suggestions import keep as keep_suggestions
from engine.story.suggestions import keep_fit
from engine.story.tree.takes import RetryPlan, add_take
from engine.story.versions import advance_version
from engine.turns.generate import Draft
from engine.turns.plan import Fence, TurnPlan
from engine.turns.result import TurnResult


async def commit(db: Database, plan: TurnPlan, draft: Draft, fence: Fence | None) -> TurnResult:
    """Store the turn; raises ``StoryMovedOn`` (storing nothing) when the fence or the version
    guard refuses it.

    ``fence.holds`` is checked first inside the transaction: when it answers False (the turn's
    lease passed to another process), nothing is stored; ``fence.stored`` runs last in it.
    """
    measured = _measured(draft)
    async with db.transaction(urgent=True) as session:
        if fence is not None and not await fence.holds(session):
            late = (
                "This turn took too long and another one took its place"
                if plan.replaces is None
                else "This retry took too long and another turn took its place"
            )
            raise StoryMovedOn(
                f"{late}, so it was not saved. Look at the newest turn and try again."
            )
        if plan.replaces is None:
            result = await _write_turn(session, plan, draft, measured)
        else:
            result = await _write_take(session, plan, plan.replaces, draft, measured)
        # The memories the context chose count as used with the turn that used them.
        await count_use(session, draft.memory_ids)
        await keep_suggestions(session, result.narrator_node_id, result.take, draft.suggestions)
        if draft.fit is not None:
            # Whether the model writes them, counted with the reply that shows it.
            assert plan.adventure.id is not None
            await keep_fit(session, plan.adventure.id, draft.fit)
        if plan.replaces is None and result.action_node_id is not None:
            # What players told characters, kept with their action (engine.story.claims).
            actions = [planned.action for planned in plan.actions]
            await keep_claims(session, plan.adventure, actions, result.action_node_id)
        if fence is not None and fence.stored is not None:
            await fence.stored(session, result)
        return result


def _measured(draft: Draft) -> dict[str, Any]:
    """How the narration was made (model, tokens, time, the prompt), as its node stores it."""
    usage = draft.reply.usage
    return {
        "model": draft.model,
        "prompt_tokens": usage.prompt_tokens if usage else draft.built.tokens,
        "completion_tokens": usage.completion_tokens if usage else None,
        "latency_ms": draft.reply.latency_ms,
        "prompt_snapshot": zlib.compress(draft.built.snapshot()),
        "context_report": replace(
            draft.built.report, cached_tokens=usage.cached_tokens if usage else None
        ).to_json(),
    }


def _narrator_node(
    plan: TurnPlan,
    draft: Draft,
    measured: dict[str, Any],
    *,
    parent_id: int,
    index: int,
    author_id: int | None,
    state_before: dict[str, Any] | None,
    state_after: dict[str, Any],
) -> StoryNode:
    world = draft.world
    assert plan.adventure.id is not None
    return StoryNode(
        adventure_id=plan.adventure.id,
        parent_id=parent_id,
        index=index,
        role=Role.NARRATOR,
        action=ActionType.CONTINUE,
        author_id=author_id,
        text=world.prose,
        token_count=count_tokens(world.prose),
        reasoning=draft.reasoning or None,
        state_block=world.report.block if world.report else world.block or None,
        state_report=world.report.to_json() if world.report else None,
        state_before=state_before,
        state_after=state_after,
        **measured,
    )


def _result(
    plan: TurnPlan,
    draft: Draft,
    *,
    version: int,
    narrator_node_id: int,
    action_node_id: int | None = None,
    take: int = 1,
    replaced_node_id: int | None = None,
) -> TurnResult:
    assert plan.adventure.id is not None
    return TurnResult(
        adventure_id=plan.adventure.id,
        version=version,
        action_node_id=action_node_id,
        narrator_node_id=narrator_node_id,
        action_text=draft.action_text,
        text=draft.world.prose,
        reasoning=draft.reasoning,
        model=draft.model,
        usage=draft.reply.usage,
        latency_ms=draft.reply.latency_ms,
        first_token_ms=draft.reply.first_token_ms,
        state_chip=draft.world.chip,
        take=take,
        take_count=take,
        replaced_node_id=replaced_node_id,
        script_message=plan.scripts.message if plan.scripts else "",
        chapter_note=draft.chapters.note,
        suggestions=draft.suggestions,
        fallback_reason=draft.fallback_reason,
    )


async def _write_turn(
    session: AsyncSession, plan: TurnPlan, draft: Draft, measured: dict[str, Any]
) -> TurnResult:
    """A new turn below the plan's parent: its actions, then the narration; the head moves to
    the narration."""
    adventure, scripts, world = plan.adventure, plan.scripts, draft.world
    assert adventure.id is not None
    story = draft.story.state if draft.story else adventure.story_state
    # Its players' rows were made when they acted. One who deleted their data meanwhile
    # (/profile delete) is not made again, and nothing of theirs is stored: the turn is refused.
    # The rows stay locked until this transaction ends, so a deletion arriving now waits, and
    # then unlinks this turn like any entry of theirs.
    if len(await lock_users(session, plan.players)) < len(plan.players):
        raise PlayerDeleted()
    parent_id, parent_index = plan.parent_id, plan.parent_index
    written: list[StoryNode] = []
    for planned, text in zip(plan.actions, draft.action_texts, strict=True):
        if not text:
            continue  # its script emptied it: the turn answers the others, or continues
        node = StoryNode(
            adventure_id=adventure.id,
            parent_id=parent_id,
            index=parent_index + 1,
            role=Role.PLAYER,
            action=planned.action.type,
            author_id=planned.action.author_id,
            text=text,
            token_count=count_tokens(text),
        )
        session.add(node)
        await session.flush()
        assert node.id is not None
        written.append(node)
        parent_id, parent_index = node.id, node.index
    narrator = _narrator_node(
        plan,
        draft,
        measured,
        parent_id=parent_id,
        index=parent_index + 1,
        author_id=plan.narrator_author_id,
        state_before=None,
        state_after=capture(world.state, adventure.script_state, story=story),
    )
    session.add(narrator)
    await session.flush()
    assert narrator.id is not None
    # If anyone moved the story while this reply was being written, the guard updates nothing
    # and the whole transaction (every node above) is rolled back.
    version = await advance_version(
        session,
        adventure.id,
        adventure.version,
        moved_on="The story moved on while this turn was being written, so it was not saved. "
        "Look at the newest turn and try again.",
        head_node_id=narrator.id,
        world_state=world.state,
        story_state=story,
        **({"script_state": scripts.saved_state()} if scripts else {}),
    )
    if scripts is not None:
        await scripts.save(session)
        # The state the turn leaves, cards as the scripts left them, for redo.
        narrator.state_after = capture(
            world.state,
            scripts.saved_state(),
            await load_cards(session, adventure.id),
            story=story,
        )
    if draft.story is not None:
        cause = TurnCause(narrator.id, 1, narrator.index, BY_MODEL)
        await record(session, adventure.id, cause, draft.story)
    # The state the turn started from (a host's corrections included) is the head's: stored
    # there once, for undo, retry, and a later Redo or branch switch back to it.
    first = written[0].id if written else narrator.id
    await keep_state_after(session, plan.parent_id, plan.snapshot, new_child_id=first)
    # Extends the branch, or forks one when the head had been moved back.
    await advance_line(
        session,
        adventure,
        head_id=plan.parent_id,
        head_index=plan.parent_index,
        new_tip_id=narrator.id,
    )
    return _result(
        plan,
        draft,
        version=version,
        narrator_node_id=narrator.id,
        action_node_id=written[0].id if written else None,
    )


async def _write_take(
    session: AsyncSession,
    plan: TurnPlan,
    retry: RetryPlan,
    draft: Draft,
    measured: dict[str, Any],
) -> TurnResult:
    """Another take of the retried turn, made live; or, when later turns follow the turn, a new
    turn beside it on a branch of its own. The head moves to it, with its state."""
    adventure, scripts, world = plan.adventure, plan.scripts, draft.world
    assert adventure.id is not None
    node = await session.get(StoryNode, retry.node_id)
    if node is None:
        raise StoryMovedOn("The turn being retried is gone; nothing was saved.")
    script_state = scripts.saved_state() if scripts else adventure.script_state
    story = draft.story.state if draft.story else adventure.story_state
    if scripts is not None:
        # Back to the cards the turn first saw, then the scripts' changes on top.
        await restore(session, adventure.id, retry.snapshot)
        await scripts.save(session)
        after = capture(
            world.state, script_state, await load_cards(session, adventure.id), story=story
        )
    else:
        after = capture(world.state, script_state, retry.snapshot.get("cards"), story=story)
    replaced: int | None = None
    if await has_children(session, retry.node_id):
        # Later turns follow this one: the new version goes beside it, on a branch.
        fresh = _narrator_node(
            plan,
            draft,
            measured,
            parent_id=retry.parent_id,
            index=node.index,
            author_id=node.author_id,
            # Beside the retried turn, under the same parent: it started from the same state,
            # the parent's, unless the retried turn keeps its own.
            state_before=await stored_state_before(session, retry.node_id)
            if retry.parent_is_narrator
            else None,
            state_after=after,
        )
        session.add(fresh)
        await session.flush()
        assert fresh.id is not None
        replaced, node, take = node.id, fresh, 1
        await fork_beside(session, adventure, retry.node_id, fresh.id)
    else:
        take = await add_take(
            session,
            node,
            text=world.prose,
            reasoning=draft.reasoning or None,
            snapshot=after,
            block=world.report.block if world.report else world.block or None,
            report=world.report.to_json() if world.report else None,
            extra=measured,
        )
    assert node.id is not None
    version = await advance_version(
        session,
        adventure.id,
        adventure.version,
        moved_on="The story moved on while this turn was being written again, so it was not "
        "saved. Look at the newest turn and try again.",
        head_node_id=node.id,
        **(
            {"world_state": world.state, "script_state": script_state, "story_state": story}
            if scripts
            else {}
        ),
    )
    if scripts is None:
        await restore(session, adventure.id, after)
    if draft.story is not None:
        await record(
            session, adventure.id, TurnCause(node.id, take, node.index, BY_MODEL), draft.story
        )
    # The replaced text leaves the line: memories past the parent are cut back.
    await story_cut_back(session, adventure.id, kept_through=retry.node_index - 1)
    return _result(
        plan,
        draft,
        version=version,
        narrator_node_id=node.id,
        take=take,
        replaced_node_id=replaced,
    )
