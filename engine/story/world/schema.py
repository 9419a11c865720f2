"""The stat schema: what a scenario's world state tracks, parsed and validated.

A schema is a JSON object of **groups**; each group is an object of **stats** keyed by id. Ids
(of groups, stats and NPCs) are letters, digits and ``_``, so a stat has a dotted **path**:
``player.hp``, ``world.day``, ``flags.alarm_raised``, ``npcs.gwen.trust``. Example (the shape of
``04-rpg-world-state.json``)::

    {
      "world":  {"day": {"type": "counter", "min": 1, "initial": 1, "desc": "..."}},
      "player": {
        "hp": {"desc": "...", "min": 0, "max": 100, "initial": 100, "max_delta_per_turn": 35,
               "cooldown": 0, "bands": [[0, 1, "dead"], [1, 25, "gravely wounded"], ...]},
        "outfit": {"type": "text", "initial": "worn leather armor", "desc": "..."}
      },
      "flags": {"alarm_raised": {"desc": "...", "initial": false}},
      "npcs": {
        "gwen": {"name": "Gwen", "keys": "Gwen, ranger, her", "desc": "...",
                 "stats": {"trust": {"min": -100, "max": 100, "initial": 20, ...}}}
      },
      "milestones": {"strongbox_found": {"desc": "Recover the stolen strongbox"}}
    }

Stat types (``"type"``; when absent it is ``flag`` in the ``flags`` group, ``milestone`` in the
``milestones`` group, and elsewhere ``text`` if ``initial`` is a string, ``flag`` if it is a
boolean, else ``number``):

``number``
    ``min``, ``max`` (optional; ``max`` must be greater than ``min``); ``initial`` (default 0,
    or the end of the range nearest to 0; must lie in the range); ``max_delta_per_turn``
    (optional, > 0); ``cooldown`` (turns, integer >= 0: after a change the stat is frozen for
    that many turns); ``bands``: ``[[lo, hi_exclusive, "words"], ...]`` sorted by ``lo`` and
    not overlapping (gaps are allowed; a value in a gap has no words). A number is whole unless
    one of ``min``/``max``/``initial``/``max_delta_per_turn`` has a fraction; whole numbers are
    rounded when changed.
``counter``
    Like a number, but it only goes up; ``min`` defaults to 0.
``text``
    ``initial`` (default ``""``), ``max_length`` (default 300; longer text is cut),
    ``cooldown``.
``flag``
    Two-way boolean: ``initial`` (default false), ``cooldown``.
``milestone``
    One-way boolean: false until reached, then true for good (``initial`` may be true).

Every stat may have ``desc`` (what it means, for the model and the players) and ``label`` (a
display name; default: the id with ``_`` as spaces). A flag or milestone may be written as just
its description (``"camp_cleared": "Clear the camp"``).

The ``npcs`` group holds NPCs: ``name`` (default: the id, title-cased), ``keys`` (comma-separated
text or a list; default: the name; an NPC is *in scene* when one of its keys appears in the
recent story, as a whole word, case-insensitively), ``desc``, and ``stats`` (an object of stats of
any type but milestone; their paths skip ``stats``: ``npcs.gwen.trust``).

Any other group name is a plain group of stats (``world``, ``player``, ``stats``, ...). Unknown
fields are errors, so typos are caught. ``parse_schema`` collects every problem it finds and
raises one ``SchemaError`` whose ``problems`` are ``"path: problem"`` lines.

The stored world state (``Adventure.world_state``) is ``{"values": {path: value},
"changed_at": {path: turn_index}}``: flat dotted paths, and for each stat the turn index at which
the model last changed it (for cooldowns).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from engine.errors import CampfireError
from engine.prompt.cards import parse_keys

TYPES = ("number", "counter", "text", "flag", "milestone")
NUMERIC = ("number", "counter")
BOOLEAN = ("flag", "milestone")

#: How many stats (NPC stats included) a schema may declare.
MAX_STATS = 300
#: Default ``max_length`` of a text stat.
DEFAULT_TEXT_LENGTH = 300
#: How many problems a SchemaError's message lists before "…and N more".
SHOWN_PROBLEMS = 10

_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_COMMON = {"type", "desc", "label", "initial"}
_FIELDS = {
    "number": _COMMON | {"min", "max", "max_delta_per_turn", "cooldown", "bands"},
    "counter": _COMMON | {"min", "max", "max_delta_per_turn", "cooldown", "bands"},
    "text": _COMMON | {"max_length", "cooldown"},
    "flag": _COMMON | {"cooldown"},
    "milestone": _COMMON,
}
_NPC_FIELDS = {"name", "keys", "desc", "stats"}


class SchemaError(CampfireError):
    """A stat schema that cannot be used; ``problems`` are ``"path: problem"`` lines."""

    retryable = False

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        shown = "\n".join(f"• {p}" for p in self.problems[:SHOWN_PROBLEMS])
        more = len(self.problems) - SHOWN_PROBLEMS
        if more > 0:
            shown += f"\n…and {more} more"
        super().__init__(f"The world-state schema has problems:\n{shown}")


@dataclass(frozen=True, slots=True)
class Band:
    lo: float
    hi: float  # exclusive
    words: str

    def holds(self, value: float) -> bool:
        return self.lo <= value < self.hi


@dataclass(frozen=True, slots=True)
class Stat:
    path: str
    key: str
    type: str
    group: str
    desc: str = ""
    label: str = ""
    initial: Any = None
    min: float | None = None
    max: float | None = None
    max_delta: float | None = None
    cooldown: int = 0
    bands: tuple[Band, ...] = ()
    integer: bool = True
    max_length: int = DEFAULT_TEXT_LENGTH
    #: The NPC's id for an NPC's stat, else None.
    npc: str | None = None

    @property
    def numeric(self) -> bool:
        return self.type in NUMERIC

    def band(self, value: Any) -> str:
        """The band words for ``value`` ("" if none)."""
        if not self.bands or not _is_number(value):
            return ""
        for band in self.bands:
            if band.holds(value):
                return band.words
        return ""

    def clamp(self, value: float) -> float:
        if self.min is not None and value < self.min:
            value = self.min
        if self.max is not None and value > self.max:
            value = self.max
        return value

    def range_text(self) -> str:
        """ "0..100", "1.." or "" for a number without bounds."""
        if self.min is None and self.max is None:
            return ""
        lo = "" if self.min is None else fmt_number(self.min)
        hi = "" if self.max is None else fmt_number(self.max)
        return f"{lo}..{hi}"


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    stats: tuple[Stat, ...]


@dataclass(frozen=True, slots=True)
class Npc:
    id: str
    name: str
    keys: tuple[str, ...]
    desc: str
    stats: tuple[Stat, ...]


@dataclass(frozen=True)
class StatSchema:
    """A parsed schema: groups and NPCs in the order written, and every stat by path."""

    groups: tuple[Group, ...] = ()
    npcs: tuple[Npc, ...] = ()
    by_path: dict[str, Stat] = field(default_factory=dict, compare=False, repr=False)
    _folded: dict[str, Stat] = field(default_factory=dict, compare=False, repr=False, init=False)

    def __post_init__(self) -> None:
        folded: dict[str, Stat] = {}
        for path, stat in self.by_path.items():
            folded.setdefault(path.casefold(), stat)
        object.__setattr__(self, "_folded", folded)

    @property
    def is_empty(self) -> bool:
        return not self.by_path

    @property
    def stats(self) -> tuple[Stat, ...]:
        return tuple(self.by_path.values())

    def stat(self, path: str) -> Stat | None:
        return self.by_path.get(path)

    def npc(self, npc_id: str) -> Npc | None:
        return next((n for n in self.npcs if n.id == npc_id), None)

    def resolve(self, path: str) -> Stat | None:
        """The stat a model most likely meant by ``path``, or None.

        Exact paths first; then case-insensitively; then with ``stats.`` segments dropped and an
        NPC's id prefixed with ``npcs.`` (``gwen.trust``); then a bare stat id that is unique in
        the schema (``hp``).
        """
        if not isinstance(path, str):
            return None
        found = self.by_path.get(path)
        if found is not None:
            return found
        folded = self._folded
        parts = [p for p in path.strip().casefold().split(".") if p]
        if not parts:
            return None
        candidates = [parts, [p for p in parts if p != "stats"]]
        candidates.append(["npcs", *candidates[1]])
        for candidate in candidates:
            found = folded.get(".".join(candidate))
            if found is not None:
                return found
        if len(parts) == 1:
            matches = [s for s in self.by_path.values() if s.key.casefold() == parts[0]]
            if len(matches) == 1:
                return matches[0]
        return None


EMPTY = StatSchema()


def _is_number(value: Any) -> TypeGuard[float]:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not (isinstance(value, float) and not math.isfinite(value))
    )


def fmt_number(value: Any) -> str:
    """A number as people write it: 5, -15, 2.5 (never 5.0)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


class _Collector:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, path: str, problem: str) -> None:
        self.problems.append(f"{path}: {problem}")


def parse_schema(raw: dict | None) -> StatSchema:
    """Parse and validate a stat schema; ``{}`` or None is the empty schema.

    Raises ``SchemaError`` listing every problem found, each as ``"path: problem"``.
    """
    if raw is None or (isinstance(raw, dict) and not raw):
        return EMPTY
    if not isinstance(raw, dict):
        raise SchemaError(["schema: must be a JSON object of groups"])
    out = _Collector()
    groups: list[Group] = []
    npcs: list[Npc] = []
    by_path: dict[str, Stat] = {}
    for group_name, body in raw.items():
        gpath = str(group_name)
        if not _valid_id(group_name):
            out.add(gpath, "group names must be letters, digits and _ (no dots or spaces)")
            continue
        if not isinstance(body, dict):
            out.add(gpath, "must be an object")
            continue
        if group_name == "npcs":
            for npc_id, npc_raw in body.items():
                npc = _parse_npc(out, str(npc_id), npc_raw)
                if npc is not None:
                    npcs.append(npc)
                    for stat in npc.stats:
                        by_path[stat.path] = stat
            continue
        stats = []
        for key, stat_raw in body.items():
            stat = _parse_stat(out, group_name, str(key), stat_raw, npc=None)
            if stat is not None:
                stats.append(stat)
                by_path[stat.path] = stat
        groups.append(Group(group_name, tuple(stats)))
    if len(by_path) > MAX_STATS:
        out.add("schema", f"too many stats ({len(by_path)}; at most {MAX_STATS})")
    if out.problems:
        raise SchemaError(out.problems)
    return StatSchema(tuple(groups), tuple(npcs), by_path)


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) and bool(_ID.match(value))


def _text(out: _Collector, path: str, value: Any, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        out.add(path, "must be text")
        return default
    return value.strip()


def _parse_npc(out: _Collector, npc_id: str, raw: Any) -> Npc | None:
    path = f"npcs.{npc_id}"
    if not _valid_id(npc_id):
        out.add(path, "NPC ids must be letters, digits and _ (no dots or spaces)")
        return None
    if not isinstance(raw, dict):
        out.add(path, "must be an object with name, keys, desc and stats")
        return None
    for unknown in raw.keys() - _NPC_FIELDS:
        out.add(f"{path}.{unknown}", "unknown field (expected name, keys, desc or stats)")
    name = _text(out, f"{path}.name", raw.get("name")) or npc_id.replace("_", " ").title()
    desc = _text(out, f"{path}.desc", raw.get("desc"))
    keys_raw = raw.get("keys")
    keys: tuple[str, ...] = (name,)
    if keys_raw is not None:
        if isinstance(keys_raw, str):
            keys = parse_keys(keys_raw)
        elif isinstance(keys_raw, list) and all(isinstance(k, str) for k in keys_raw):
            keys = parse_keys(keys_raw)
        else:
            out.add(f"{path}.keys", "must be comma-separated text or a list of text")
            keys = ()
        if not keys and isinstance(keys_raw, str | list):
            out.add(f"{path}.keys", "must name at least one key")
    stats_raw = raw.get("stats", {})
    stats: list[Stat] = []
    if not isinstance(stats_raw, dict):
        out.add(f"{path}.stats", "must be an object of stats")
    else:
        for key, stat_raw in stats_raw.items():
            stat = _parse_stat(out, "npcs", str(key), stat_raw, npc=npc_id)
            if stat is None:
                continue
            if stat.type == "milestone":
                out.add(f"{path}.stats.{key}.type", "an NPC's stat cannot be a milestone")
                continue
            stats.append(stat)
    return Npc(npc_id, name, keys, desc, tuple(stats))


def _parse_stat(out: _Collector, group: str, key: str, raw: Any, *, npc: str | None) -> Stat | None:
    path = f"npcs.{npc}.{key}" if npc else f"{group}.{key}"
    where = f"npcs.{npc}.stats.{key}" if npc else path  # where it is written in the schema
    if not _valid_id(key):
        out.add(where, "stat ids must be letters, digits and _ (no dots or spaces)")
        return None
    if isinstance(raw, str) and group in ("flags", "milestones"):
        raw = {"desc": raw}
    if not isinstance(raw, dict):
        out.add(where, "must be an object")
        return None
    type_ = raw.get("type")
    if type_ is None:
        initial = raw.get("initial")
        if group == "flags":
            type_ = "flag"
        elif group == "milestones":
            type_ = "milestone"
        elif isinstance(initial, bool):
            type_ = "flag"
        elif isinstance(initial, str):
            type_ = "text"
        else:
            type_ = "number"
    if type_ not in TYPES:
        out.add(f"{where}.type", f"unknown type {type_!r} (expected {', '.join(TYPES)})")
        return None
    for unknown in sorted(raw.keys() - _FIELDS[type_]):
        out.add(f"{where}.{unknown}", f"unknown field for a {type_}")
    before = len(out.problems)
    desc = _text(out, f"{where}.desc", raw.get("desc"))
    label = _text(out, f"{where}.label", raw.get("label")) or key.replace("_", " ")
    base: dict[str, Any] = dict(
        path=path, key=key, type=type_, group=group, desc=desc, label=label, npc=npc
    )
    if type_ != "milestone":
        base["cooldown"] = _cooldown(out, f"{where}.cooldown", raw.get("cooldown"))
    if type_ in NUMERIC:
        stat = _parse_numeric(out, where, raw, base)
    elif type_ == "text":
        max_length = raw.get("max_length", DEFAULT_TEXT_LENGTH)
        if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1:
            out.add(f"{where}.max_length", "must be a whole number of at least 1")
            max_length = DEFAULT_TEXT_LENGTH
        initial = _text(out, f"{where}.initial", raw.get("initial"))
        stat = Stat(**base, initial=initial[:max_length], max_length=max_length)
    else:
        initial = raw.get("initial", False)
        if not isinstance(initial, bool):
            out.add(f"{where}.initial", "must be true or false")
            initial = False
        stat = Stat(**base, initial=initial)
    return stat if len(out.problems) == before else None


def _cooldown(out: _Collector, path: str, value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        out.add(path, "must be a whole number of turns, 0 or more")
        return 0
    return value


def _parse_numeric(out: _Collector, where: str, raw: dict, base: dict[str, Any]) -> Stat:
    def number(name: str) -> float | None:
        value = raw.get(name)
        if value is None:
            return None
        if not _is_number(value):
            out.add(f"{where}.{name}", "must be a number")
            return None
        return value

    lo, hi = number("min"), number("max")
    if base["type"] == "counter" and lo is None:
        lo = 0
    if lo is not None and hi is not None and hi <= lo:
        out.add(f"{where}.max", "must be a number greater than min")
    initial = number("initial")
    if initial is None:  # 0, or the end of the range nearest to it
        initial = max(lo, 0) if lo is not None else 0
        initial = min(hi, initial) if hi is not None and (lo is None or hi > lo) else initial
    elif (lo is not None and initial < lo) or (hi is not None and initial > hi):
        span = f"{fmt_number(lo) if lo is not None else '…'} and "
        span += fmt_number(hi) if hi is not None else "…"
        out.add(f"{where}.initial", f"must be between {span}")
    max_delta = number("max_delta_per_turn")
    if max_delta is not None and max_delta <= 0:
        out.add(f"{where}.max_delta_per_turn", "must be greater than 0")
    integer = all(v is None or float(v).is_integer() for v in (lo, hi, initial, max_delta))
    bands = _parse_bands(out, f"{where}.bands", raw.get("bands"))
    if integer:
        initial = int(initial)
    return Stat(
        **base,
        initial=initial,
        min=lo,
        max=hi,
        max_delta=max_delta,
        bands=bands,
        integer=integer,
    )


def _parse_bands(out: _Collector, path: str, raw: Any) -> tuple[Band, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        out.add(path, 'must be a list of [low, high_exclusive, "words"]')
        return ()
    bands: list[Band] = []
    for i, item in enumerate(raw):
        where = f"{path}[{i}]"
        if isinstance(item, dict):  # {"min": 0, "max": 25, "label": "hurt"} is read too
            item = [item.get("min"), item.get("max"), item.get("label", item.get("words"))]
        lo, hi, words = (
            item if isinstance(item, list | tuple) and len(item) == 3 else (None, None, None)
        )
        if not (_is_number(lo) and _is_number(hi) and isinstance(words, str)):
            out.add(where, 'must be [low, high_exclusive, "words"]')
            continue
        if hi <= lo:
            out.add(where, f"high ({fmt_number(hi)}) must be greater than low ({fmt_number(lo)})")
            continue
        if not words.strip():
            out.add(where, "words must not be empty")
            continue
        if bands:
            previous = bands[-1]
            if lo < previous.lo:
                out.add(where, "bands must be sorted by their low bound")
                continue
            if lo < previous.hi:
                out.add(
                    where,
                    f"overlaps the band before it (starts at {fmt_number(lo)}, "
                    f"before {fmt_number(previous.hi)})",
                )
                continue
        bands.append(Band(lo, hi, words.strip()))
    return tuple(bands)


def initial_state(schema: StatSchema) -> dict:
    """The state a new adventure starts with: ``{"values": {...}, "changed_at": {}}``."""
    return {"values": {s.path: s.initial for s in schema.by_path.values()}, "changed_at": {}}


def sync_state(schema: StatSchema, state: Any) -> dict:
    """A well-formed copy of ``state`` for ``schema`` (never mutates ``state``).

    Missing or ill-typed values take their initial value, values of stats the schema no longer
    has are dropped, out-of-range numbers are clamped, and other top-level keys are kept.
    """
    state = state if isinstance(state, dict) else {}
    values = state.get("values")
    values = values if isinstance(values, dict) else {}
    changed = state.get("changed_at")
    changed = changed if isinstance(changed, dict) else {}
    new_values: dict[str, Any] = {}
    for path, stat in schema.by_path.items():
        value = values.get(path, stat.initial)
        if stat.numeric:
            value = stat.clamp(value) if _is_number(value) else stat.initial
            if stat.integer:
                value = int(round(value))
        elif stat.type == "text":
            value = value[: stat.max_length] if isinstance(value, str) else stat.initial
        elif not isinstance(value, bool):
            value = stat.initial
        new_values[path] = value
    new_changed = {
        p: t
        for p, t in changed.items()
        if p in schema.by_path and isinstance(t, int) and not isinstance(t, bool)
    }
    out = {k: v for k, v in state.items() if k not in ("values", "changed_at")}
    out["values"] = new_values
    out["changed_at"] = new_changed
    return out
