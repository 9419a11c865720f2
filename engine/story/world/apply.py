"""World state in a turn: what the context shows, what the stream hides, what the turn keeps.

The model proposes a delta in a fenced block after its prose; the engine disposes: the block is
held back from the stream, parsed, refereed against the scenario's schema, and the result is
stored with the turn in the same transaction as the prose.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from engine.prompt.held_block import BlockPart
from engine.story.world.parser import extract_state
from engine.story.world.referee import StateReport, referee
from engine.story.world.render import STATE_PART, chip, guide, live_state, reminder, state_block
from engine.story.world.schema import StatSchema, initial_state, parse_schema, sync_state

FENCE = "```"


@lru_cache(maxsize=256)
def _parsed(schema_json: str) -> StatSchema:
    return parse_schema(json.loads(schema_json))


def schema_of(raw: dict[str, Any] | None) -> StatSchema | None:
    """The adventure's parsed schema, or None when it has none (parsed once per distinct
    schema: every turn of every adventure from one scenario shares it)."""
    if not raw:
        return None
    schema = _parsed(json.dumps(raw, sort_keys=True))
    return None if schema.is_empty else schema


def current_state(schema: StatSchema, state: dict[str, Any] | None) -> dict[str, Any]:
    """The stored state (repaired if the schema changed since), or the initial one."""
    return sync_state(schema, state) if state and "values" in state else initial_state(schema)


@dataclass(frozen=True, slots=True)
class WorldSections:
    guide: str = ""
    state: str = ""
    #: What the held-back block carries for the world state; None without a schema.
    rule: BlockPart | None = None
    reminder: str = ""


def world_sections(
    raw_schema: dict[str, Any] | None, state: dict[str, Any] | None, *, recent_text: str
) -> WorldSections:
    schema = schema_of(raw_schema)
    if schema is None:
        return WorldSections()
    return WorldSections(
        guide=guide(schema),
        state=live_state(schema, current_state(schema, state), recent_text=recent_text),
        rule=STATE_PART,
        reminder=reminder(schema),
    )


class BlockHolder:
    """Lets prose through to the stream and holds back everything from a fence on.

    The state block is for the engine, not the players; what it holds back is never shown, and
    the final text (prose without the block) replaces the stream at the end anyway. A fence's
    backticks can arrive split across deltas, so a trailing run of backticks waits too.
    """

    def __init__(self) -> None:
        self._text = ""
        self._shown = 0
        self._held = False

    def feed(self, piece: str) -> str:
        """The part of ``piece`` that may be shown now."""
        if self._held:
            return ""
        self._text += piece
        at = self._text.find(FENCE, self._shown)
        if at >= 0:
            self._held = True
            visible = self._text[self._shown : at]
            self._shown = at
            return visible
        end = max(self._shown, len(self._text.rstrip("`")))
        visible = self._text[self._shown : end]
        self._shown = end
        return visible


@dataclass(frozen=True, slots=True)
class SettledWorld:
    prose: str
    state: dict[str, Any]
    report: StateReport | None
    chip: str
    #: The block's typed narrative events (``engine.story.narrative``), not yet validated.
    story: tuple[Any, ...] = ()
    #: The block as written, when no schema's report keeps it (history re-attaches it).
    block: str = ""


def settle(
    raw_schema: dict[str, Any] | None,
    state: dict[str, Any] | None,
    text: str,
    *,
    turn_index: int,
    hold: bool = False,
) -> SettledWorld:
    """Strip the block from the reply and referee it; never raises (a bad block is ``{}``).
    ``hold``: a block is looked for even without a schema (a feature reads it)."""
    schema = schema_of(raw_schema)
    if schema is None and not hold:
        return SettledWorld(text, state or {}, None, "")
    found = extract_state(text)
    if schema is None:
        return SettledWorld(found.prose, state or {}, None, "", found.story, found.block)
    new_state, report = referee(
        schema, current_state(schema, state), found.delta, turn_index=turn_index, block=found.block
    )
    if not report.block:
        report.block = state_block(report)
    return SettledWorld(found.prose, new_state, report, chip(schema, report), story=found.story)
