"""The narrative state in a turn: the model's events validated (generate step), the rule and
the scene's section for the context."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.prompt.held_block import BlockPart
from engine.story.narrative.canon import protected_facts
from engine.story.narrative.events import BY_MODEL, Outcome, apply_events
from engine.story.narrative.render import STORY_PART, prompt_section
from engine.story.narrative.state import normalised, stored

#: The share of the prompt's available tokens the scene's state may use.
STORY_SHARE = 0.10


def settle_story(
    state: dict[str, Any] | None,
    proposed: Sequence[Any],
    *,
    tracking: bool,
    canon: Iterable[str] = (),
) -> Outcome | None:
    """The narration's events applied to the state, or None when the adventure does not track
    its narrative state (its events, if any, are ignored). ``canon``: the texts Canon protects
    (``engine.story.narrative.canon``)."""
    if not tracking:
        return None
    outcome = apply_events(state, proposed, by=BY_MODEL, protected=protected_facts(canon))
    return replace(outcome, state=stored(outcome.state))


def holds_story_block(adventure: Any) -> bool:
    """Whether the reply's block is the engine's to hold back and strip: while tracking is on,
    and after it was on (past turns' blocks, re-attached in history, still show the model how
    to write them; its events are then ignored)."""
    return bool(adventure.story_tracking or adventure.story_state)


@dataclass(frozen=True, slots=True)
class StoryContext:
    #: What the held-back block carries for it; None when the adventure does not track it.
    rule: BlockPart | None = None
    section: str = ""
    note: str = ""


def story_context(
    state: dict[str, Any] | None, *, tracking: bool, recent_text: str, available: int
) -> StoryContext:
    """What the prompt says of the narrative state: the rule, and the scene's part."""
    if not tracking:
        return StoryContext()
    shown = prompt_section(normalised(state), recent_text, int(available * STORY_SHARE))
    return StoryContext(STORY_PART, shown.text, shown.reason)
