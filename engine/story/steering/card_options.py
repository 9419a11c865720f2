"""A player's changes to a story card's world-info options (``/card options``).

``LORE_OPTIONS`` is the one table of what a player may set: each row names an option as the
card stores it (``engine.prompt.lore``, after SillyTavern's World Info: docs.sillytavern.app,
"World Info"; ``public/scripts/world-info.js``), its kind, its bounds
(those ``clean_lore`` keeps, read from its constants) and a line of help. The front end builds
its slash options from the table, so a new option is one row here.

A change is all or nothing: every value is checked before anything is written, and one that
``clean_lore`` would clamp, cut or drop is refused naming the option and what it takes, rather
than stored as something else. Pure: the card's row is written by ``StoryCards.set_options``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine.errors import InvalidInput
from engine.platform.sanitise import QUOTE_MAX, echo
from engine.prompt.lore import (
    DEFAULT_DEPTH,
    GROUP_MAX_CHARS,
    LOGIC_LABELS,
    LOGICS,
    MAX_DEPTH,
    MAX_GROUPS,
    MAX_SCAN_DEPTH,
    MAX_TIMED,
    MAX_WEIGHT,
    ORDER_LIMIT,
    POSITIONS,
    SECONDARY_MAX_CHARS,
    clean_lore,
    read_lore,
)
from engine.prompt.regex_keys import MAX_PATTERN_CHARS, MAX_REGEX_KEYS, compile_regex

#: What a text option holds to clear it (Discord sends no empty text option).
CLEAR = "-"

Kind = Literal["text", "number", "flag", "choice"]


def _as_typed(text: str) -> Any:
    return text


@dataclass(frozen=True, slots=True)
class LoreOption:
    """One world-info option a player may set."""

    #: As the card stores it (``clean_lore``'s key), and as the command names it.
    name: str
    kind: Kind
    #: The slash option's description (Discord allows 100 characters).
    help: str
    #: A number's bounds; a text's most characters (``high``).
    low: int = 0
    high: int = 0
    #: A choice's (label, stored value) pairs.
    choices: tuple[tuple[str, str], ...] = ()
    #: Another option without which this one does nothing (``logic`` without secondary keys).
    needs: str = ""
    #: A text's reading into what ``clean_lore`` takes; it refuses what it cannot read.
    read: Callable[[str], Any] = _as_typed
    #: A text's accepted values, in words.
    takes: str = ""

    @property
    def accepted(self) -> str:
        """What the option takes, in words, for a refusal."""
        if self.kind == "number":
            return f"a whole number from {self.low:,} to {self.high:,}"
        if self.kind == "flag":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(label for label, _ in self.choices)
        return self.takes


# A regex key as SillyTavern writes one: /pattern/flags, a slash inside escaped.
_REGEX_KEY = re.compile(r"/(?:\\.|[^/\\])+/[a-z]*")


def _regex_keys(text: str) -> list[str]:
    keys = _REGEX_KEY.findall(text)
    if _REGEX_KEY.sub("", text).replace(",", " ").strip() or not keys:
        raise InvalidInput(
            "Nothing was changed: `regex` takes keys written /pattern/flags, separated by "
            "spaces, e.g. `/dragons?/i /wyrm/`."
        )
    if len(keys) > MAX_REGEX_KEYS:
        raise InvalidInput(
            f"Nothing was changed: a card holds at most {MAX_REGEX_KEYS} regex keys; "
            f"you gave {len(keys)}."
        )
    for key in keys:
        # The same test clean_lore applies: RE2 must run it within its bounds.
        if compile_regex(key) is None:
            raise InvalidInput(
                f"Nothing was changed: the regex key “{echo(key, QUOTE_MAX)}” is not one "
                f"Campfire runs: at most {MAX_PATTERN_CHARS} characters, flags among gimsuy, "
                "and no look-arounds or back-references (RE2's syntax)."
            )
    return keys


def _group_names(text: str) -> str:
    names = [" ".join(name.split()) for name in text.split(",") if name.strip()]
    too_long = next((name for name in names if len(name) > GROUP_MAX_CHARS), None)
    if too_long is not None or len(names) > MAX_GROUPS:
        raise InvalidInput(
            f"Nothing was changed: `group` takes up to {MAX_GROUPS} names with commas, each at "
            f"most {GROUP_MAX_CHARS} characters."
        )
    return text


def _logic_choices() -> tuple[tuple[str, str], ...]:
    return tuple((LOGIC_LABELS[logic], logic) for logic in LOGICS)


#: Every option ``/card options`` sets, in the order Discord lists them. Discord allows 25
#: options to a command: ``card`` and ``reset`` take two.
LORE_OPTIONS: tuple[LoreOption, ...] = (
    LoreOption(
        "secondary",
        "text",
        "Secondary keys, with commas, checked by logic (- clears them)",
        high=SECONDARY_MAX_CHARS,
        takes=f"words with commas, at most {SECONDARY_MAX_CHARS:,} characters together",
    ),
    LoreOption(
        "logic",
        "choice",
        "How secondary keys combine with a primary key (AND ANY unless set)",
        choices=_logic_choices(),
        needs="secondary",
    ),
    LoreOption("probability", "number", "Percent chance it goes in when it fires", 0, 100),
    LoreOption(
        "order",
        "number",
        "Insertion order: higher goes later and claims room first (100)",
        -ORDER_LIMIT,
        ORDER_LIMIT,
    ),
    LoreOption(
        "scan_depth",
        "number",
        "How many recent story entries its keys are looked for in",
        0,
        MAX_SCAN_DEPTH,
    ),
    LoreOption("case_sensitive", "flag", "Keys match only in the same case"),
    LoreOption("whole_words", "flag", "Keys match only whole words (true unless set)"),
    LoreOption("recurse", "flag", "Its text may bring in other cards"),
    LoreOption("exclude_recursion", "flag", "Other cards' text never brings it in"),
    LoreOption("sticky", "number", "Once in, it stays for this many more entries", 0, MAX_TIMED),
    LoreOption(
        "cooldown", "number", "After it leaves, it cannot fire for this many entries", 0, MAX_TIMED
    ),
    LoreOption(
        "delay", "number", "It cannot fire before the story has this many entries", 0, MAX_TIMED
    ),
    LoreOption(
        "group",
        "text",
        "Inclusion groups, with commas: one card of a group goes in (- clears)",
        high=MAX_GROUPS * (GROUP_MAX_CHARS + 2),
        read=_group_names,
        takes=f"up to {MAX_GROUPS} names with commas",
    ),
    LoreOption(
        "group_weight",
        "number",
        "Its weight in the group's draw (100 unless set)",
        1,
        MAX_WEIGHT,
        needs="group",
    ),
    LoreOption(
        "group_override",
        "flag",
        "It wins its group's draw (by order among such cards)",
        needs="group",
    ),
    LoreOption(
        "group_scoring",
        "flag",
        "In its group, cards whose keys matched most are drawn from",
        needs="group",
    ),
    LoreOption(
        "position",
        "choice",
        "Where it goes in the prompt (Campfire's place unless set)",
        choices=(
            *(
                (f"{words} (set depth)" if name == "depth" else words, name)
                for name, words in POSITIONS.items()
            ),
            ("where Campfire puts it", CLEAR),
        ),
    ),
    LoreOption(
        "depth",
        "number",
        f"With position at depth: entries from the story's end ({DEFAULT_DEPTH} unless set)",
        0,
        MAX_DEPTH,
        needs="position",
    ),
    LoreOption("disabled", "flag", "The card never goes in"),
    LoreOption(
        "regex",
        "text",
        "Regex keys, /pattern/flags with spaces between (- clears them)",
        high=MAX_REGEX_KEYS * (MAX_PATTERN_CHARS + 10),
        read=_regex_keys,
        takes="keys written /pattern/flags",
    ),
)

OPTIONS_BY_NAME = {option.name: option for option in LORE_OPTIONS}


def changed_lore(
    current: Any, changes: Mapping[str, Any], *, reset: bool = False
) -> dict[str, Any]:
    """A card's options (``current``, as stored) after a player's ``changes`` (option name to
    value; a text option's ``CLEAR`` clears it), from none when ``reset``: as ``clean_lore``
    stores them. Raises ``InvalidInput`` naming the first value it would not keep as given."""
    wanted: dict[str, Any] = {}
    for name, value in changes.items():
        option = OPTIONS_BY_NAME.get(name)
        if option is None:
            raise InvalidInput(f"Nothing was changed: there is no world-info option `{name}`.")
        wanted[name] = _checked(option, value)
    merged = {} if reset else read_lore(current).to_json()
    for name, value in wanted.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = value
    if "position" in wanted and wanted["position"] != "depth" and "depth" not in wanted:
        merged.pop("depth", None)  # a depth means nothing away from a depth
    if wanted.get("depth") is not None and merged.get("position") != "depth":
        raise InvalidInput(
            "Nothing was changed: `depth` places a card only with `position` at a depth; "
            "set `position` to at a depth too."
        )
    for name in wanted:
        needs = OPTIONS_BY_NAME[name].needs
        if needs and wanted[name] is not None and not merged.get(needs):
            raise InvalidInput(
                f"Nothing was changed: `{name}` applies only to a card with `{needs}`; "
                f"set `{needs}` too."
            )
    problems: list[str] = []
    stored = clean_lore(merged, problems)
    if problems:  # a bound the table does not know: refused as clean_lore words it
        raise InvalidInput(f"Nothing was changed: {problems[0]}")
    return stored


def _checked(option: LoreOption, value: Any) -> Any:
    """``value`` as ``clean_lore`` reads it (None: clear the option), or a refusal."""
    if option.kind == "text" and isinstance(value, str):
        text = " ".join(value.split()) if option.name != "regex" else value.strip()
        if text == CLEAR:
            return None
        if text and len(text) <= option.high:
            value = option.read(text)
            problems: list[str] = []
            clean_lore({option.name: value}, problems)
            if not problems:
                return value
    elif option.kind == "number" and _whole(value) and option.low <= value <= option.high:
        return value
    elif option.kind == "flag" and isinstance(value, bool):
        return value
    elif option.kind == "choice" and any(value == stored for _, stored in option.choices):
        return None if value == CLEAR else value
    raise InvalidInput(
        f"Nothing was changed: `{option.name}` takes {option.accepted}; "
        f"“{echo(str(value), QUOTE_MAX)}” is not that."
    )


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
