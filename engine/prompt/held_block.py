"""The one instruction for the held-back block: a fenced ```state block after the prose, read
by the engine and never shown to players, that carries what each feature asks of the model.

Each feature that reads the block gives its part (``BlockPart``): the key it reads, what goes
there, and its share of the example. The world state's part changes stats by their paths; the
chapters' lists ``"events"``; the narrative state's lists ``"story"``; suggested actions list
``"suggestions"`` (``engine.story.world.parser.RESERVED_LISTS``). Asked once, with one example
that holds them all: asked apart, each rule asked for "a fenced ```state block" again (the
world state, the narrative state and suggestions three times), and they disagreed on a turn
with nothing to report (``{}``, or no block).

The parts are placed in a fixed order, whatever order the features add them in, so the system
message is the same every turn (``engine.turns.context``: the cached prefix). A part the
engine left out (suggestions on a model that never writes the block) is reported with why
(``engine.prompt.sections.block_section``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: The parts' order in the instruction and in its example.
ORDER = ("state", "events", "story", "suggestions")

OPENING = (
    "After your reply, add one fenced ```state block: a JSON object the engine reads and the "
    "players never see. Put in it:"
)
CLOSING = "Leave out a key with nothing to report; when none has anything, write {}."


@dataclass(frozen=True, slots=True)
class BlockPart:
    """What one feature asks the block to carry."""

    #: One of ``ORDER``.
    key: str
    #: As Insights names it ("World-state changes").
    title: str
    #: What goes in the block for it, as one item of the instruction's list.
    rule: str
    #: Its share of the one example (top-level keys).
    example: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.key not in ORDER:
            raise ValueError(f"no held-back block part {self.key!r}")


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A part the engine chose not to ask for this turn, and why (for Insights)."""

    part: BlockPart
    reason: str


def ordered(parts: Sequence[BlockPart]) -> list[BlockPart]:
    """The parts in ``ORDER``, one of each key (the first given wins)."""
    by_key: dict[str, BlockPart] = {}
    for part in parts:
        by_key.setdefault(part.key, part)
    return [by_key[key] for key in ORDER if key in by_key]


def instruction(parts: Sequence[BlockPart]) -> str:
    """The block's instruction for these parts; "" when there are none."""
    parts = ordered(parts)
    if not parts:
        return ""
    example: dict[str, Any] = {}
    for part in parts:
        example.update(part.example)
    lines = [OPENING, *(f"- {part.rule}" for part in parts)]
    lines.append(f"For example:\n```state\n{json.dumps(example, ensure_ascii=False)}\n```")
    lines.append(CLOSING)
    return "\n".join(lines)
