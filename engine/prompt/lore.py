"""A story card's world-info options: how and when it fires, as SillyTavern's World Info runs
its entries.

The reference is SillyTavern's documentation (docs.sillytavern.app, "World Info") and its
source (SillyTavern/SillyTavern, ``public/scripts/world-info.js``: ``world_info_logic``,
``WorldInfoBuffer.matchKeys`` and ``checkWorldInfo``). A card keeps them in one JSON object
(``lore`` on ``CardFields``), holding only what differs from the defaults, so a card written
for AI Dungeon (no options) behaves as it always did:

- ``secondary``: SillyTavern's ``keysecondary`` (its "optional filter"), with ``logic`` one of
  ``and_any`` (a primary key and any secondary key), ``not_all`` (a primary key, and not every
  secondary key), ``not_any`` (a primary key and no secondary key) or ``and_all`` (a primary key
  and every secondary key): ``world_info_logic`` ``AND_ANY`` 0, ``NOT_ALL`` 1, ``NOT_ANY`` 2,
  ``AND_ALL`` 3.
- ``regex``: primary keys that are regular expressions (``/pattern/flags``, SillyTavern's and
  NovelAI's syntax), run on RE2 (``engine.prompt.regex_keys``): a card fires on any of its keys
  or any of these.
- ``disabled``: the card never goes in (SillyTavern's ``disable``). Always-on is the card's own
  ``always_on`` column (SillyTavern's ``constant``).
- ``case_sensitive`` and ``whole_words``: how keys match; unset, Campfire's defaults
  (case-insensitive, whole words).
- ``scan_depth``: how many of the newest story entries are searched, besides the new action;
  unset, the context engine's (4).
- ``order``: SillyTavern's insertion order: a higher number goes in later (nearer the story's
  end) and claims the card budget first; 100 unless set, as SillyTavern's default.
- ``probability``: the percent chance the card goes in when it fires (SillyTavern's
  ``probability`` with ``useProbability``). The roll is a hash of the adventure, the turn and
  the card, so a retry or an undo replays the same choice.
- ``sticky``, ``cooldown``, ``delay``: SillyTavern's timed effects, in story entries (as it
  counts chat messages): once in, a card stays in for ``sticky`` more entries whatever the
  story says; then it cannot fire for ``cooldown`` more; and it never fires before the line
  has ``delay`` entries. Nothing is stored for them: each turn replays the card over the line
  (``engine.prompt.card_scan.timed_match``), so undo and branches find their own line's state.
- ``group`` (names, with commas), ``group_weight``, ``group_override``: SillyTavern's inclusion
  groups: of the cards of one group that fire in a turn only one goes in, the one with
  ``group_override`` and the highest order, else one drawn by the weights (default 100), the
  draw fixed for the turn as the probability roll is. ``group_scoring``: SillyTavern's
  ``useGroupScoring`` (``filterGroupsByScoring``): before that choice, a scoring card whose
  keys matched fewer times than the best of its group's (``card_scan.key_score``) drops out.
- ``recurse``: the card's text may trigger other cards (SillyTavern's recursive scan, which
  ``preventRecursion`` turns off for an entry); ``exclude_recursion``: no other card's text
  triggers this one (SillyTavern's ``excludeRecursion``). Recursion is off unless set, as AI
  Dungeon never recursed.
- ``position``: where the card goes in the prompt (SillyTavern's "Insertion Position",
  ``world_info_position`` in ``world-info.js``): ``before`` the story (where always-on cards
  go), ``after`` it (where triggered cards go), ``an_top`` / ``an_bottom`` (just before / after
  the author's note, wherever it stands), or ``depth``: in the story, ``depth`` entries from its
  end as SillyTavern's "@ D" counts (0 after the newest; the new action is the newest). Unset,
  always-on cards go before the story and the others after it (``engine.prompt.lore_places``).

Pure: no database. ``clean_lore`` reads options from a file or a player, bounded, naming what it
could not keep; ``read_lore`` reads them back from a stored card.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.prompt.regex_keys import MAX_REGEX_KEYS, compile_regex

#: SillyTavern's ``world_info_logic``, by its numbers, and Campfire's names for them.
LOGICS = ("and_any", "not_all", "not_any", "and_all")
LOGIC_LABELS = {
    "and_any": "AND ANY",
    "not_all": "NOT ALL",
    "not_any": "NOT ANY",
    "and_all": "AND ALL",
}
DEFAULT_ORDER = 100
#: The most characters of secondary keys together, as a card's own keys.
SECONDARY_MAX_CHARS = 1000
#: The deepest scan: entries beyond the story's window are not in the context anyway.
MAX_SCAN_DEPTH = 100
#: Insertion orders are clamped to this range (SillyTavern's are any number).
ORDER_LIMIT = 1_000_000

_FLAGS = ("disabled", "recurse", "exclude_recursion", "group_override", "group_scoring")
_TIMED = ("sticky", "cooldown", "delay")
#: The longest sticky, cooldown or delay, in entries: replaying a card's past costs as many
#: scans as sticky and cooldown together.
MAX_TIMED = 100
#: SillyTavern's ``DEFAULT_WEIGHT`` of an entry in an inclusion group; weights are bounded.
DEFAULT_WEIGHT = 100
MAX_WEIGHT = 1_000_000
#: An inclusion group's name, and how many groups one card may be in.
GROUP_MAX_CHARS = 64
MAX_GROUPS = 8
_TRI = ("case_sensitive", "whole_words")
#: Where a card may be placed (``position``), and how ``/card list`` and Insights say it.
POSITIONS = {
    "before": "before the story",
    "after": "after the story",
    "an_top": "in the author's note (top)",
    "an_bottom": "in the author's note (bottom)",
    "depth": "at depth",
}
#: SillyTavern's default depth for an entry at a depth (``DEFAULT_DEPTH``), and the deepest.
DEFAULT_DEPTH = 4
MAX_DEPTH = 100


@dataclass(frozen=True, slots=True)
class Lore:
    """A card's options, read; every default is what a card without options does."""

    secondary: tuple[str, ...] = ()
    logic: str = "and_any"
    regex: tuple[str, ...] = ()
    disabled: bool = False
    case_sensitive: bool | None = None
    whole_words: bool | None = None
    scan_depth: int | None = None
    order: int = DEFAULT_ORDER
    probability: int = 100
    recurse: bool = False
    exclude_recursion: bool = False
    sticky: int = 0
    cooldown: int = 0
    delay: int = 0
    groups: tuple[str, ...] = ()
    group_weight: int = DEFAULT_WEIGHT
    group_override: bool = False
    group_scoring: bool = False
    position: str | None = None
    depth: int = DEFAULT_DEPTH

    @property
    def place(self) -> str | None:
        """Where the card was placed, in words ("at depth 2"), or None when unset."""
        if self.position is None:
            return None
        if self.position == "depth":
            return f"at depth {self.depth}"
        return POSITIONS[self.position]

    def to_json(self) -> dict[str, Any]:
        """The options that differ from the defaults, as a card stores them."""
        out: dict[str, Any] = {}
        if self.secondary:
            out["secondary"] = list(self.secondary)
            out["logic"] = self.logic
        if self.regex:
            out["regex"] = list(self.regex)
        for name in (*_FLAGS, *_TRI):
            value = getattr(self, name)
            if value not in (None, False) or (name in _TRI and value is False):
                out[name] = value
        if self.scan_depth is not None:
            out["scan_depth"] = self.scan_depth
        if self.order != DEFAULT_ORDER:
            out["order"] = self.order
        if self.probability != 100:
            out["probability"] = self.probability
        for name in _TIMED:
            if getattr(self, name):
                out[name] = getattr(self, name)
        if self.groups:
            out["group"] = ",".join(self.groups)
            if self.group_weight != DEFAULT_WEIGHT:
                out["group_weight"] = self.group_weight
            if self.group_override:
                out["group_override"] = True
        if self.position is not None:
            out["position"] = self.position
            if self.position == "depth":
                out["depth"] = self.depth
        return out

    def describe(self) -> list[str]:
        """The options in words, for ``/card`` and its list: one short phrase each."""
        out: list[str] = []
        if self.disabled:
            out.append("disabled")
        if self.secondary:
            shown = ", ".join(self.secondary)
            out.append(f"secondary keys ({LOGIC_LABELS[self.logic]}): {shown}")
        if self.regex:
            out.append(f"regex keys: {', '.join(self.regex)}")
        if self.case_sensitive:
            out.append("case-sensitive")
        if self.whole_words is False:
            out.append("matches inside words")
        if self.scan_depth is not None:
            out.append(f"scans {self.scan_depth} entries")
        if self.order != DEFAULT_ORDER:
            out.append(f"order {self.order}")
        if self.probability != 100:
            out.append(f"probability {self.probability}%")
        if self.recurse:
            out.append("its text triggers other cards")
        if self.exclude_recursion:
            out.append("not triggered by other cards")
        for name in _TIMED:
            if getattr(self, name):
                out.append(f"{name} {getattr(self, name)} entries")
        if self.groups:
            how = "first by order" if self.group_override else f"weight {self.group_weight}"
            if self.group_scoring:
                how = f"most keys matched, then {how}"
            out.append(f"inclusion group {', '.join(self.groups)} ({how})")
        if self.place is not None:
            out.append(f"placed {self.place}")
        return out


DEFAULT_LORE = Lore()


def read_lore(raw: Any) -> Lore:
    """A stored card's options; anything malformed reads as its default (never an error: the
    column was written through ``clean_lore``, or by an older Campfire without it)."""
    if not isinstance(raw, Mapping) or not raw:
        return DEFAULT_LORE
    return _lore(raw, [])


def clean_lore(raw: Any, warnings: list[str], *, where: str = "") -> dict[str, Any]:
    """Options from a file or a player, validated and bounded, as a card stores them; what is
    not kept is named in ``warnings`` (``where`` says which card)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        warnings.append(f"{where}world-info options must be an object; they were left out.")
        return {}
    problems: list[str] = []
    lore = _lore(raw, problems)
    unknown = sorted(str(name) for name in raw if name not in _KNOWN)
    if unknown:
        problems.append(f"unknown option(s) {', '.join(unknown[:8])}")
    if problems:
        warnings.append(f"{where}world-info options not kept as written: {'; '.join(problems)}.")
    return lore.to_json()


_KNOWN = {
    "secondary",
    "regex",
    "logic",
    "scan_depth",
    "order",
    "probability",
    "group",
    "group_weight",
    "group_override",
    "position",
    "depth",
    *_TIMED,
    *_FLAGS,
    *_TRI,
}


def _lore(raw: Mapping[str, Any], problems: list[str]) -> Lore:
    secondary = _keys(raw.get("secondary"), problems)
    logic = raw.get("logic", "and_any")
    if isinstance(logic, int) and not isinstance(logic, bool) and 0 <= logic < len(LOGICS):
        logic = LOGICS[logic]
    if logic not in LOGICS:
        problems.append(f"logic {str(logic)[:20]!r} (one of {', '.join(LOGICS)})")
        logic = "and_any"
    flags = {name: _flag(raw, name, problems) for name in _FLAGS}
    tri = {name: _tri(raw, name, problems) for name in _TRI}
    position = raw.get("position")
    if position is not None and position not in POSITIONS:
        problems.append(f"position {str(position)[:20]!r} (one of {', '.join(POSITIONS)})")
        position = None
    if raw.get("depth") is not None and position != "depth":
        problems.append("depth (only with position depth)")
    return Lore(
        secondary=secondary,
        logic=logic,
        regex=_regex(raw.get("regex"), problems),
        scan_depth=_number(raw, "scan_depth", 0, MAX_SCAN_DEPTH, None, problems),
        order=_number(raw, "order", -ORDER_LIMIT, ORDER_LIMIT, DEFAULT_ORDER, problems) or 0,
        probability=_number(raw, "probability", 0, 100, 100, problems) or 0,
        sticky=_number(raw, "sticky", 0, MAX_TIMED, 0, problems) or 0,
        cooldown=_number(raw, "cooldown", 0, MAX_TIMED, 0, problems) or 0,
        delay=_number(raw, "delay", 0, MAX_TIMED, 0, problems) or 0,
        groups=_groups(raw.get("group"), problems),
        group_weight=_number(raw, "group_weight", 1, MAX_WEIGHT, DEFAULT_WEIGHT, problems) or 1,
        group_override=flags["group_override"],
        disabled=flags["disabled"],
        recurse=flags["recurse"],
        exclude_recursion=flags["exclude_recursion"],
        case_sensitive=tri["case_sensitive"],
        whole_words=tri["whole_words"],
        group_scoring=flags["group_scoring"],
        position=position,
        depth=(_number(raw, "depth", 0, MAX_DEPTH, DEFAULT_DEPTH, problems) or 0)
        if position == "depth"
        else DEFAULT_DEPTH,
    )


def _keys(value: Any, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    parts = value.split(",") if isinstance(value, str) else value
    if not isinstance(parts, list | tuple):
        problems.append("secondary keys (a list of words)")
        return ()
    out: list[str] = []
    seen: set[str] = set()
    used = 0
    for part in parts:
        if not isinstance(part, str):
            continue
        key = " ".join(part.replace(",", " ").split())
        folded = key.casefold()
        if not key or folded in seen:
            continue
        if used + len(key) + 1 > SECONDARY_MAX_CHARS:
            problems.append(f"secondary keys past {SECONDARY_MAX_CHARS} characters")
            break
        seen.add(folded)
        used += len(key) + 1
        out.append(key)
    return tuple(out)


def _groups(value: Any, problems: list[str]) -> tuple[str, ...]:
    # SillyTavern's ``group`` is one text; commas put an entry in several groups.
    if value is None or value == "":
        return ()
    if not isinstance(value, str):
        problems.append("group (a name, or names with commas)")
        return ()
    names = [" ".join(name.split()) for name in value.split(",")]
    out = list(dict.fromkeys(name[:GROUP_MAX_CHARS] for name in names if name))
    if len(out) > MAX_GROUPS:
        problems.append(f"groups past {MAX_GROUPS}")
    return tuple(out[:MAX_GROUPS])


def _regex(value: Any, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        problems.append("regex (a list of /pattern/flags keys)")
        return ()
    out: list[str] = []
    for key in value:
        if not isinstance(key, str) or not key.strip():
            continue
        if len(out) == MAX_REGEX_KEYS:
            problems.append(f"regex keys past {MAX_REGEX_KEYS}")
            break
        if compile_regex(key.strip()) is None:
            problems.append(f"regex key “{key.strip()[:60]}” (not one RE2 runs, or too long)")
            continue
        if key.strip() not in out:
            out.append(key.strip())
    return tuple(out)


def _flag(raw: Mapping[str, Any], name: str, problems: list[str]) -> bool:
    value = raw.get(name, False)
    if isinstance(value, bool):
        return value
    problems.append(f"{name} (true or false)")
    return False


def _tri(raw: Mapping[str, Any], name: str, problems: list[str]) -> bool | None:
    value = raw.get(name)
    if value is None or isinstance(value, bool):
        return value
    problems.append(f"{name} (true, false or unset)")
    return None


def _number(
    raw: Mapping[str, Any],
    name: str,
    low: int,
    high: int,
    default: int | None,
    problems: list[str],
) -> int | None:
    value = raw.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        problems.append(f"{name} (a number)")
        return default
    number = int(value)
    if not low <= number <= high:
        problems.append(f"{name} {number} (from {low} to {high}; clamped)")
        number = max(low, min(high, number))
    return number
