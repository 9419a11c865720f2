"""World state as text: for the model (guide, live state, its part of the held-back block,
reminder) and for players (the chip under a narration, ``/state``).

Every function is empty-schema-safe: with an empty schema it returns ``""``.
"""

from __future__ import annotations

import json
from typing import Any

from engine.prompt.cards import find_trigger
from engine.prompt.held_block import BlockPart
from engine.story.world.referee import Change, StateReport
from engine.story.world.schema import Stat, StatSchema, fmt_number, sync_state

#: What the held-back block carries for the world state (``engine.prompt.held_block``).
STATE_PART = BlockPart(
    key="state",
    title="World-state changes",
    rule=(
        "only what changed in the world state this turn, by the paths above: numbers are "
        'changes (-15 loses 15, 5 gains 5), "=40" sets one outright; text fields take the new '
        "text, flags true or false, milestones only true. The engine checks it and applies it."
    ),
    example={
        "player": {"hp": -15},
        "npcs": {"gwen": {"trust": 5}},
        "milestones": {"strongbox_found": True},
    },
)

REMINDER = "Remember: end with a ```state block of what changed (or {})."

#: At most this many items in a chip, then "+N more".
CHIP_ITEMS = 8
#: Text values in a chip are cut to this many characters.
CHIP_TEXT = 40

_SEP = " · "


def _band_range(stat: Stat, lo: float, hi: float) -> str:
    """A band's span as people read it: "1–24", "0", "30–50" (cut to the stat's range)."""
    if stat.integer and float(lo).is_integer() and float(hi).is_integer():
        first, last = int(lo), int(hi) - 1
        if stat.min is not None:
            first = max(first, int(stat.min))
        if stat.max is not None:
            last = min(last, int(stat.max))
        if last <= first:
            return fmt_number(first)
        dash = " to " if first < 0 or last < 0 else "–"
        return f"{fmt_number(first)}{dash}{fmt_number(last)}"
    return f"{fmt_number(lo)} to <{fmt_number(hi)}"


def ladder(stat: Stat) -> str:
    """The band ladder: "0 dead · 1–24 gravely wounded · …" ("" without bands)."""
    return _SEP.join(f"{_band_range(stat, b.lo, b.hi)} {b.words}" for b in stat.bands)


def _span(stat: Stat) -> str:
    if stat.min is None and stat.max is None:
        return ""
    if stat.max is None:
        return f"{fmt_number(stat.min)}+"
    if stat.min is None:
        return f"up to {fmt_number(stat.max)}"
    lo, hi = fmt_number(stat.min), fmt_number(stat.max)
    return f"{lo} to {hi}" if stat.min < 0 else f"{lo}–{hi}"


def _guide_line(stat: Stat, name: str) -> str:
    facts: list[str] = []
    if stat.numeric:
        head = f"{name} {_span(stat)}".rstrip()
        if stat.type == "counter":
            facts.append("counter, only goes up")
        if stat.max_delta is not None:
            facts.append(f"at most ±{fmt_number(stat.max_delta)} a turn")
    elif stat.type == "text":
        head = f"{name} (text)"
    elif stat.type == "flag":
        head = f"{name} (true/false)"
    else:
        head = f"{name} (milestone: set true once reached)"
    if stat.cooldown:
        facts.append(f"then unchanged for {stat.cooldown} turn{'s' if stat.cooldown > 1 else ''}")
    if facts:
        head += f" ({'; '.join(facts)})"
    line = f"- {head}"
    if stat.desc:
        line += f": {stat.desc}"
    if stat.bands:
        line += f"\n  {ladder(stat)}"
    return line


def guide(schema: StatSchema) -> str:
    """The world-state guide: every stat by path, with description and band ladder."""
    if schema.is_empty:
        return ""
    lines = ["The engine keeps these numbers and facts; they change only through your state block."]
    for group in schema.groups:
        if not group.stats:
            continue
        lines.append(f"{group.name}:")
        lines.extend(_guide_line(stat, stat.path) for stat in group.stats)
    for npc in schema.npcs:
        head = f"NPC {npc.name} (npcs.{npc.id}; in scene when the story mentions "
        head += f"{', '.join(npc.keys)})" if npc.keys else "them)"
        lines.append(head + (f": {npc.desc}" if npc.desc else ""))
        lines.extend(_guide_line(stat, stat.path) for stat in npc.stats)
    return "\n".join(lines)


def value_text(stat: Stat, value: Any) -> str:
    """A value with its band words: "55/100 (scratched)", "yes", '"worn leather"'."""
    if stat.numeric:
        shown = fmt_number(value)
        if stat.max is not None and stat.type == "number" and (stat.min or 0) >= 0:
            shown += f"/{fmt_number(stat.max)}"
        band = stat.band(value)
        return f"{shown} ({band})" if band else shown
    if stat.type == "text":
        return json.dumps(value, ensure_ascii=False) if value else '""'
    if stat.type == "milestone":
        return "reached" if value else "not yet"
    return "yes" if value else "no"


def npcs_in_scene(schema: StatSchema, recent_text: str) -> list:
    """The NPCs whose keys occur in ``recent_text`` (whole words, case-insensitively)."""
    if not recent_text:
        return []
    return [npc for npc in schema.npcs if npc.keys and find_trigger(npc.keys, recent_text)]


def live_state(schema: StatSchema, state: dict, *, recent_text: str) -> str:
    """Current values with band words; only NPCs in scene get their stats listed."""
    if schema.is_empty:
        return ""
    values = sync_state(schema, state)["values"]
    lines = []
    for group in schema.groups:
        if group.stats:
            items = _SEP.join(f"{s.key} {value_text(s, values[s.path])}" for s in group.stats)
            lines.append(f"{group.name}: {items}")
    for npc in npcs_in_scene(schema, recent_text):
        items = _SEP.join(f"{s.key} {value_text(s, values[s.path])}" for s in npc.stats)
        lines.append(f"npcs.{npc.id} ({npc.name}, in scene): {items}".rstrip(": "))
    return "\n".join(lines)


def reminder(schema: StatSchema) -> str:
    """One line, last in the prompt ("" for an empty schema)."""
    return "" if schema.is_empty else REMINDER


def _display(schema: StatSchema, stat: Stat) -> str:
    if stat.npc is not None:
        npc = schema.npc(stat.npc)
        return f"{npc.name if npc else stat.npc} {stat.label}"
    return stat.label


def _short(text: Any) -> str:
    text = str(text)
    return text if len(text) <= CHIP_TEXT else text[: CHIP_TEXT - 1].rstrip() + "…"


def _change_text(schema: StatSchema, change: Change) -> str:
    stat = schema.stat(change.path)
    if stat is None:
        return f"{change.path} → {_short(change.after)}"
    name = _display(schema, stat)
    if stat.type == "milestone":
        text = f"✓ {name}" if change.after else f"{name} not reached"
    elif stat.type == "flag":
        text = f"{name}: {'yes' if change.after else 'no'}"
    elif stat.type == "text":
        text = f"{name} → “{_short(change.after)}”"
    elif change.before == change.after:
        text = f"{name} stays {fmt_number(change.after)}"
    else:
        text = f"{name} {fmt_number(change.before)} → {fmt_number(change.after)}"
    extras = []
    if stat.numeric and stat.band(change.after):
        extras.append(stat.band(change.after))
    if change.note:
        extras.append(change.note)
    return f"{text} ({'; '.join(extras)})" if extras else text


def chip(schema: StatSchema, report: StateReport | None) -> str:
    """What changed this turn, one short line ("" if nothing changed or was rejected).

    ``hp 100 → 85 (healthy) · Gwen trust 20 → 25 (wary) · ✓ strongbox found ·
    ✗ rejected mana (unknown path)``
    """
    if report is None or report.is_empty or schema.is_empty:
        return ""
    order = {path: i for i, path in enumerate(schema.by_path)}
    changes = sorted(report.changes, key=lambda c: order.get(c.path, len(order)))
    items = [_change_text(schema, c) for c in changes]
    for rejection in report.rejected:
        stat = schema.stat(rejection.path)
        name = _display(schema, stat) if stat is not None else _short(rejection.path)
        items.append(f"✗ rejected {name} ({rejection.reason})")
    if len(items) > CHIP_ITEMS:
        items = [*items[: CHIP_ITEMS - 1], f"+{len(items) - CHIP_ITEMS + 1} more"]
    return _SEP.join(items)


def describe(schema: StatSchema, state: dict) -> str:
    """The whole state for ``/state``: grouped, with bands and the paths to set, markdown."""
    if schema.is_empty:
        return ""
    values = sync_state(schema, state)["values"]
    sections = []
    for group in schema.groups:
        if not group.stats:
            continue
        lines = [f"**{group.name.replace('_', ' ').title()}**"]
        for stat in group.stats:
            value = values[stat.path]
            if stat.type == "milestone":
                mark = "✓" if value else "☐"
                lines.append(f"{mark} {stat.label}" + (f" — {stat.desc}" if stat.desc else ""))
            else:
                lines.append(f"`{stat.path}` {value_text(stat, value)}")
        sections.append("\n".join(lines))
    for npc in schema.npcs:
        lines = [f"**{npc.name}**" + (f" ({', '.join(npc.keys)})" if npc.keys else "")]
        lines.extend(f"`{s.path}` {value_text(s, values[s.path])}" for s in npc.stats)
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


def state_block(report: StateReport | None) -> str:
    """The block to re-attach to a past AI turn: the model's own, or one built from what was
    applied (``{}`` when nothing was)."""
    if report is not None and report.block.strip():
        return report.block.strip()
    delta: dict[str, Any] = {}
    for change in report.changes if report is not None else []:
        node = delta
        parts = change.path.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if isinstance(change.after, bool | str):
            node[parts[-1]] = change.after
        elif isinstance(change.before, int | float) and isinstance(change.after, int | float):
            node[parts[-1]] = change.after - change.before
        else:
            node[parts[-1]] = change.after
    return f"```state\n{json.dumps(delta, ensure_ascii=False)}\n```"
