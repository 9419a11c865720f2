"""The referee: the model proposes a delta, the engine disposes; never raises.

Each path of a delta (flat, as ``parser.extract_delta`` gives it) goes through, in order:

1. **path exists** (``schema.resolve``: exact, then case-insensitive, ``gwen.trust`` for
   ``npcs.gwen.trust``, a unique bare id such as ``hp``) — else rejected, "unknown path";
2. **type fits** — numbers and counters take a change (``-15``, ``"+5"``, ``"-5"``, ``"5"``) or
   an absolute value (``"=40"``, ``{"set": 40}``); text takes text; flags and milestones take
   true/false (``"true"``/``"false"`` too) — else "expects a number" / "expects text" /
   "expects true or false";
3. **cooldown** — a stat with ``cooldown: N`` changed at turn ``t`` is frozen for turns
   ``t+1 .. t+N``. Measured in turn indexes from ``state["changed_at"]``, so a retry (the same
   turn index, from the state before the turn) does not advance it;
4. **counters never decrease** — "counters only go up";
5. **max delta per turn** — the change is limited to ``±max_delta_per_turn`` (a *clamp*,
   noted "limited to ±35 per turn"); several entries for one stat in a delta share the limit;
6. **clamp to range** — noted "clamped to 0..100"; text longer than ``max_length`` is cut;
7. **milestones only become true** — false on a reached milestone: "milestones stay reached"
   (false on an unreached one changes nothing);
8. **flags both ways**.

Whole-number stats are rounded. A value equal to the current one changes nothing and is not
reported. Changes applied as asked are ``applied``; changes applied after limiting or clamping
are ``clamped`` (even if the clamp left the value where it was); refused ones are ``rejected``.
``changed_at[path]`` becomes the turn index of every stat whose value changed.

A nested delta (``{"player": {"hp": -15}}``) is flattened first. A malformed delta (not a
dict) is ``{}``: the turn continues with nothing changed.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from engine.story.world.parser import flatten_delta
from engine.story.world.schema import Stat, StatSchema, fmt_number, sync_state

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


@dataclass
class Change:
    path: str
    before: Any
    after: Any
    note: str = ""

    def to_json(self) -> dict:
        out = {"path": self.path, "before": self.before, "after": self.after}
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class Rejection:
    path: str
    value: Any
    reason: str

    def to_json(self) -> dict:
        return {"path": self.path, "value": self.value, "reason": self.reason}


@dataclass
class StateReport:
    applied: list[Change] = field(default_factory=list)
    clamped: list[Change] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    #: The raw state block as the model wrote it (for re-attaching to history).
    block: str = ""

    @property
    def is_empty(self) -> bool:
        return not (self.applied or self.clamped or self.rejected)

    @property
    def changes(self) -> list[Change]:
        """Applied and clamped changes together."""
        return [*self.applied, *self.clamped]

    def to_json(self) -> dict:
        return {
            "applied": [c.to_json() for c in self.applied],
            "clamped": [c.to_json() for c in self.clamped],
            "rejected": [r.to_json() for r in self.rejected],
            "block": self.block,
        }

    @classmethod
    def from_json(cls, data: Any) -> StateReport:
        """The report ``to_json`` wrote; anything malformed is skipped (never raises)."""
        if not isinstance(data, dict):
            return cls()

        def changes(key: str) -> list[Change]:
            items = data.get(key)
            return [
                Change(
                    str(c.get("path", "")),
                    c.get("before"),
                    c.get("after"),
                    str(c.get("note") or ""),
                )
                for c in (items if isinstance(items, list) else [])
                if isinstance(c, dict)
            ]

        rejected = data.get("rejected")
        block = data.get("block")
        return cls(
            applied=changes("applied"),
            clamped=changes("clamped"),
            rejected=[
                Rejection(str(r.get("path", "")), r.get("value"), str(r.get("reason") or ""))
                for r in (rejected if isinstance(rejected, list) else [])
                if isinstance(r, dict)
            ],
            block=block if isinstance(block, str) else "",
        )


class _Refused(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _is_number(value: Any) -> TypeGuard[float]:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _number_text(text: str) -> float | None:
    text = text.strip().replace(" ", "").replace("\u2212", "-")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return int(value) if value.is_integer() and "." not in text and "e" not in text else value


def _read_numeric(raw: Any) -> tuple[str, float]:
    """("delta" | "set", number) for a number stat's raw value."""
    if isinstance(raw, dict) and len(raw) == 1 and ("set" in raw or "=" in raw):
        inner = raw.get("set", raw.get("="))
        if _is_number(inner):
            return "set", inner
        if isinstance(inner, str):
            value = _number_text(inner)
            if value is not None:
                return "set", value
        raise _Refused("expects a number")
    if _is_number(raw):
        return "delta", raw
    if isinstance(raw, str):
        text = raw.strip()
        mode = "delta"
        if text.startswith("="):
            mode, text = "set", text[1:]
        value = _number_text(text)
        if value is not None:
            return mode, value
    raise _Refused("expects a number")


def _read_bool(raw: Any) -> bool:
    if isinstance(raw, dict) and len(raw) == 1 and ("set" in raw or "=" in raw):
        raw = raw.get("set", raw.get("="))
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        word = raw.strip().casefold()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise _Refused("expects true or false")


def _read_text(raw: Any) -> str:
    if isinstance(raw, dict) and len(raw) == 1 and ("set" in raw or "=" in raw):
        raw = raw.get("set", raw.get("="))
    if isinstance(raw, str):
        return raw.strip()
    raise _Refused("expects text")


def _num(value: float, stat: Stat) -> float:
    if stat.integer:
        return int(round(value))
    return value


class _Turn:
    """One delta being refereed against a state copy."""

    def __init__(self, schema: StatSchema, state: dict, turn_index: int, *, host: bool) -> None:
        self.schema = schema
        self.state = state
        self.values: dict[str, Any] = state["values"]
        self.changed_at: dict[str, int] = state["changed_at"]
        self.start = dict(self.values)
        self.start_changed = dict(self.changed_at)
        self.turn_index = turn_index
        self.host = host
        self.report = StateReport()
        self._entries: dict[str, Change] = {}

    def apply(self, path: Any, raw: Any) -> None:
        stat = self.schema.resolve(path) if isinstance(path, str) else None
        if stat is None:
            self.report.rejected.append(Rejection(str(path), _plain(raw), "unknown path"))
            return
        try:
            after, notes = self._decide(stat, raw)
        except _Refused as refused:
            self.report.rejected.append(Rejection(stat.path, _plain(raw), refused.reason))
            return
        self._record(stat, after, notes)

    def _decide(self, stat: Stat, raw: Any) -> tuple[Any, list[str]]:
        current = self.values[stat.path]
        if stat.numeric:
            mode, amount = _read_numeric(raw)
        elif stat.type == "text":
            text = _read_text(raw)
        else:
            wanted = _read_bool(raw)
        if not self.host and stat.cooldown:
            last = self.changed_at.get(stat.path)
            if last is not None and 0 < self.turn_index - last <= stat.cooldown:
                left = last + stat.cooldown + 1 - self.turn_index
                raise _Refused(f"cooling down ({left} more turn{'s' if left != 1 else ''})")
        notes: list[str] = []
        if stat.numeric:
            target = current + amount if mode == "delta" else amount
            target = _num(target, stat)
            if stat.type == "counter" and not self.host and target < current:
                raise _Refused("counters only go up")
            start = self.start[stat.path]
            if stat.max_delta is not None and not self.host:
                low, high = start - stat.max_delta, start + stat.max_delta
                if not low <= target <= high:
                    target = _num(min(max(target, low), high), stat)
                    notes.append(f"limited to ±{fmt_number(stat.max_delta)} per turn")
            clamped = _num(stat.clamp(target), stat)
            if clamped != target:
                notes.append(f"clamped to {stat.range_text()}")
            return clamped, notes
        if stat.type == "text":
            if len(text) > stat.max_length:
                text = text[: stat.max_length].rstrip()
                notes.append(f"cut to {stat.max_length} characters")
            return text, notes
        if stat.type == "milestone" and not self.host and current and not wanted:
            raise _Refused("milestones stay reached")
        return wanted, notes

    def _record(self, stat: Stat, after: Any, notes: list[str]) -> None:
        path = stat.path
        before = self.start[path]
        self.values[path] = after
        if not self.host:
            if after != before:
                self.changed_at[path] = self.turn_index
            elif path in self.start_changed:  # back where the turn started
                self.changed_at[path] = self.start_changed[path]
            else:
                self.changed_at.pop(path, None)
        previous = self._entries.pop(path, None)
        if previous is not None:  # a second entry for one stat: one line in the report
            for bucket in (self.report.applied, self.report.clamped):
                if any(c is previous for c in bucket):
                    bucket[:] = [c for c in bucket if c is not previous]
            notes = list(dict.fromkeys([*filter(None, previous.note.split("; ")), *notes]))
        if after == before and not notes:
            return
        change = Change(path, before, after, "; ".join(notes))
        (self.report.clamped if notes else self.report.applied).append(change)
        self._entries[path] = change


def _plain(raw: Any) -> Any:
    """A JSON-safe copy of a raw value for the report."""
    if raw is None or isinstance(raw, bool | int | str):
        return raw
    if isinstance(raw, float):
        return raw if math.isfinite(raw) else str(raw)
    if isinstance(raw, dict):
        return {str(k): _plain(v) for k, v in list(raw.items())[:20]}
    if isinstance(raw, list | tuple):
        return [_plain(v) for v in list(raw)[:20]]
    return str(raw)


def _prepare(schema: StatSchema, state: Any) -> dict:
    return sync_state(schema, copy.deepcopy(state) if isinstance(state, dict) else {})


def referee(
    schema: StatSchema, state: dict, delta: dict, *, turn_index: int, block: str = ""
) -> tuple[dict, StateReport]:
    """Apply ``delta`` to (a copy of) ``state`` under the rules above; never raises.

    Returns the new state (``state`` itself is never mutated) and the report of the turn.
    """
    try:
        new_state = _prepare(schema, state)
        turn = _Turn(schema, new_state, _index(turn_index), host=False)
        for path, raw in flatten_delta(delta).items():
            turn.apply(path, raw)
        turn.report.block = block if isinstance(block, str) else ""
        return new_state, turn.report
    except Exception:  # noqa: BLE001 - a bug here must not lose the turn's prose
        fallback = state if isinstance(state, dict) else {}
        return copy.deepcopy(fallback), StateReport(block=block if isinstance(block, str) else "")


def set_value(
    schema: StatSchema, state: dict, path: str, raw_value: str, *, turn_index: int
) -> tuple[dict, StateReport]:
    """The host's ``/state set path value``; never raises.

    ``raw_value`` is read for the stat's type: a number sets a number or counter outright
    (``"40"``, ``"-50"``; ``"+5"``, ``"+=5"`` and ``"-=5"`` change it instead), text is the new
    text (surrounding quotes dropped), and true/false/yes/no/on/off set a flag or milestone.
    Path and type are checked and the value is clamped to range like any change, but the host is
    the authority: no per-turn limit, no cooldown, counters may go down, milestones may be
    un-reached, and the set does not start a cooldown (``changed_at`` is left alone).
    """
    try:
        new_state = _prepare(schema, state)
        turn = _Turn(schema, new_state, _index(turn_index), host=True)
        stat = schema.resolve(path) if isinstance(path, str) else None
        value: Any = raw_value.strip() if isinstance(raw_value, str) else raw_value
        if stat is not None and isinstance(value, str):
            if stat.numeric:
                value = _host_number(value)
            elif stat.type == "text" and len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
        turn.apply(path, value)
        return new_state, turn.report
    except Exception:  # noqa: BLE001
        fallback = state if isinstance(state, dict) else {}
        return copy.deepcopy(fallback), StateReport()


def _index(turn_index: Any) -> int:
    return turn_index if isinstance(turn_index, int) and not isinstance(turn_index, bool) else 0


def _host_number(value: str) -> Any:
    """A host's number: absolute unless written "+5", "+=5" or "-=5"."""
    text = value.replace(" ", "")
    if text.startswith(("+=", "-=")):
        return text[0] + text[2:]
    if text.startswith(("+", "=")):
        return text
    return "=" + text
