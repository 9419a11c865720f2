"""A turn's plan: what it answers, what it writes and where, decided before the model is asked.

Play, continue and retry differ only here. Play writes its players' actions (one; or several,
in order, for a round) under the story's head, then the narration; continue writes the
narration alone; a retry writes its turn's narration again, from the state the turn first saw.
Everything after the plan (the generate step and the commit) is the same for all three.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import NotFound, StoryMovedOn
from engine.library.scripting.hooks import TurnScripts
from engine.library.scripting.sandbox import Limits
from engine.people.access.checks import blocked_refusal, check_not_muted, muting_of
from engine.people.access.rules import NO_ADVENTURE
from engine.people.blocks import blocked_now, check_not_blocked_now
from engine.platform.events import Usage
from engine.storage.models import Adventure, StoryNode
from engine.story.actions import PlayerAction, format_action
from engine.story.snapshots import capture
from engine.story.tree.takes import RetryPlan, plan_retry

if TYPE_CHECKING:
    from engine.turns.result import TurnResult


@dataclass(frozen=True, slots=True)
class Fence:
    """What a turn's final transaction asks of its caller.

    ``holds`` is checked first: False means "do not store" (the turn's lease passed to another
    process). ``stored`` runs in that same transaction once the turn is written, for what must
    commit with it or not at all (the request's outcome: a process killed between two commits
    would leave a stored turn whose request still says "running", and be announced as
    interrupted, with a Retry that plays it twice).
    """

    holds: Callable[[AsyncSession], Awaitable[bool]]
    stored: Callable[[AsyncSession, TurnResult], Awaitable[None]] | None = None
    #: Told what the model call cost as soon as it ends, whole or broken off (None: the model
    #: was never asked, or refused at once): the turn's reserved tokens are settled by it
    #: whether the turn is then stored or fails.
    spent: Callable[[Usage | None], None] | None = None


NO_STORY = "This adventure has no story yet."


@dataclass(frozen=True, slots=True)
class ActionToWrite:
    """A player's action the turn writes into the story before its narration."""

    action: PlayerAction
    #: As the story writes it; the scripts' onInput may still rewrite it.
    text: str


@dataclass(frozen=True, slots=True)
class TurnPlan:
    #: As the turn sees it, detached from any session; a retry's is rolled back to the state
    #: its turn first saw, with the head on the line its context is built from.
    adventure: Adventure
    #: The node the turn's first new node goes below.
    parent_id: int
    parent_index: int
    #: Written in order between the parent and the narration; none for continue and retry.
    actions: tuple[ActionToWrite, ...]
    #: The adventure's state before the turn (cards included when scripts may change them).
    snapshot: dict[str, Any]
    #: The adventure's enabled scripts, loaded for this turn; None when it has none.
    scripts: TurnScripts | None
    #: Who the narration is credited to: whoever asked for a continue; nobody when it answers
    #: actions, whose nodes are credited to their players.
    narrator_author_id: int | None = None
    #: The accounts that acted, seen now.
    players: tuple[int, ...] = ()
    #: A retry: the turn written again. Its new take replaces it at its own index.
    replaces: RetryPlan | None = None

    @property
    def index(self) -> int:
        """The narration's index. A retry keeps its turn's, so cooldown clocks (which count
        indexes) stay where the first take left them."""
        return self.parent_index + len(self.actions) + 1


async def _muted(session: AsyncSession, adventure: Adventure, user_id: int | None) -> bool:
    return user_id is not None and await muting_of(session, adventure, user_id) is not None


async def plan_turn(
    session: AsyncSession,
    adventure_id: int,
    actions: Sequence[PlayerAction],
    *,
    max_action_chars: int,
    script_limits: Limits,
    max_story_cards: int,
) -> TurnPlan:
    """Play (or continue): the actions, in order, then the narration, below the head."""
    texts = [format_action(action, max_chars=max_action_chars) for action in actions]
    # The head's index with the adventure, in the one read.
    row = (
        await session.execute(
            select(Adventure, col(StoryNode.index))
            .outerjoin(StoryNode, col(StoryNode.id) == Adventure.head_node_id)
            .where(col(Adventure.id) == adventure_id)
        )
    ).first()
    if row is None or row[0].ended_at is not None:
        raise NotFound(NO_ADVENTURE)
    adventure, head_index = row
    if adventure.head_node_id is None or head_index is None:
        raise NotFound(NO_STORY)
    # Asked again as the turn runs: a player muted or kicked while their action waited in the
    # queue does not play it (a round's waiting actions went with the mute itself; one taken
    # by a close as the mute came is left out of the round's turn).
    # The operator's blocks likewise, read from the database (a block made in another process
    # since the action was sent).
    if len(actions) == 1 and actions[0].author_id is not None:
        await check_not_blocked_now(session, actions[0].author_id, adventure.server_id)
        await check_not_muted(session, adventure, actions[0].author_id)
    elif len(actions) > 1:
        authors = {a.author_id for a in actions if a.author_id is not None}
        blocked, server_blocked = await blocked_now(session, authors, adventure.server_id)
        if server_blocked:
            raise blocked_refusal(user_blocked=False)
        actions = [
            a
            for a in actions
            if a.author_id not in blocked and not await _muted(session, adventure, a.author_id)
        ]
        texts = [format_action(action, max_chars=max_action_chars) for action in actions]
    scripts = await TurnScripts.load(
        session,
        adventure,
        actors=[action.actor for action in actions],
        limits=script_limits,
        max_cards=max_story_cards,
    )
    # Continue adds no text, so nothing of it is written: only the narration.
    written = tuple(
        ActionToWrite(action, text) for action, text in zip(actions, texts, strict=True) if text
    )
    return TurnPlan(
        adventure=adventure,
        parent_id=adventure.head_node_id,
        parent_index=head_index,
        actions=written,
        # With scripts the cards may change this turn, so undo must be able to put them back.
        snapshot=capture(
            adventure.world_state,
            adventure.script_state,
            scripts.rows if scripts else None,
            story=adventure.story_state,
        ),
        scripts=scripts,
        narrator_author_id=None if written or not actions else actions[0].author_id,
        players=tuple(
            dict.fromkeys(action.author_id for action in actions if action.author_id is not None)
        ),
    )


async def plan_take(
    session: AsyncSession,
    adventure_id: int,
    node_id: int | None,
    *,
    script_limits: Limits,
    max_story_cards: int,
) -> TurnPlan:
    """Retry: the newest narrator turn written again, as another take.

    The adventure is rolled back to the turn's snapshot in memory only, and the context is built
    from the turn's parent, so the text being replaced is not in its own prompt.
    """
    adventure = await session.get(Adventure, adventure_id)
    if adventure is None or adventure.ended_at is not None:
        raise NotFound(NO_ADVENTURE)
    if node_id is not None and adventure.head_node_id != node_id:
        # Asked for while another turn was still being written: that one is newer.
        raise StoryMovedOn(
            "The story moved on before the retry could start (a newer turn arrived), "
            "so nothing was retried. Look at the newest turn first."
        )
    retry = await plan_retry(session, adventure)
    # A detached copy rolled back to the turn's snapshot: what the turn first saw.
    session.expunge(adventure)
    adventure.head_node_id = retry.context_head_id
    adventure.world_state = retry.snapshot.get("world_state") or {}
    adventure.script_state = retry.snapshot.get("script_state") or {}
    adventure.story_state = retry.snapshot.get("story") or {}
    scripts = await TurnScripts.load(
        session, adventure, limits=script_limits, max_cards=max_story_cards
    )
    if scripts is not None and "cards" in retry.snapshot:
        # The cards as the turn first saw them, not as its replaced take left them.
        scripts.use_cards(retry.snapshot["cards"])
    return TurnPlan(
        adventure=adventure,
        parent_id=retry.parent_id,
        parent_index=retry.node_index - 1,
        # The turn's action, if a player acted, is in the story already: it is answered again
        # (the generate step gives it to the context), not written again.
        actions=(),
        snapshot=retry.snapshot,
        scripts=scripts,
        replaces=retry,
    )
