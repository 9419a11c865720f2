"""A lorebook entry's options as a story card's world-info options (``engine.prompt.lore``), and
what the card cannot keep, named for the import's preview.

SillyTavern writes its entries' options in two shapes (``public/scripts/world-info.js``,
``newWorldInfoEntryTemplate`` and ``convertCharacterBook``): a world-info file's entry has them
at its top (``keysecondary``, ``selective``, ``selectiveLogic``, ``constant``, ``probability``
with ``useProbability``, ``order``, ``caseSensitive``, ``matchWholeWords``, ``scanDepth``,
``excludeRecursion``, ``preventRecursion``, ``sticky``, ``cooldown``, ``delay``, ``position``,
``depth``, ``group``, ``groupWeight``, ``groupOverride``, ``useGroupScoring`` …), a Character
Card V2 ``character_book`` entry (the spec, github.com/malfoyslastname/character-card-spec-v2)
has the spec's own (``secondary_keys``, ``selective``, ``insertion_order``, ``case_sensitive``,
``constant``, ``position``) and SillyTavern's others under ``extensions`` in snake case
(``selectiveLogic``, ``probability``, ``useProbability``, ``scan_depth``, ``match_whole_words``,
``exclude_recursion``, ``prevent_recursion``, ``group``, ``group_weight``, ``group_override``,
``use_group_scoring``, ``sticky`` …). Both are read here.

SillyTavern's scan depth counts chat messages with the newest (the player's) as the first; a
card's counts story entries besides the new action, so depth ``n`` becomes ``n - 1``. An entry
with no scan depth, case or whole-word setting of its own follows the player's global settings,
which the file does not carry: the card follows Campfire's (4 entries, case-insensitive, whole
words, which are SillyTavern's default case and whole-word settings too). SillyTavern's recursive
scan is on in its default settings (``default/content/settings.json``), so an entry's text
triggers others unless it prevents recursion.

An entry's ``position`` (SillyTavern's ``world_info_position``; in a character book, the spec's
``before_char`` / ``after_char``, and SillyTavern's number under ``extensions``, which wins as
in its ``convertCharacterBook``) becomes the card's place (``engine.prompt.lore_places``): 0
before the story, 1 after it, 2 and 3 the author's note's top and bottom, 4 a depth (its
``depth``). A place that is where Campfire puts the card anyway (before the story for a constant
entry, after it for the others) is left unset, so the card stays where Campfire's own go. The
example messages (5, 6) and outlets (7) Campfire has not: those entries go where Campfire
places cards, named in the preview, as is a depth entry's ``role`` other than system.

A NovelAI lorebook entry has fewer: ``forceActivation``, ``insertionOrder`` and
``cascadingActivation`` (the entry is also triggered by keys in other active entries' text).
A KoboldAI world-info entry has fewer still (``kobold_options``).

A book may set options for the entries that do not set them (SillyTavern's global world-info
settings, which its files do not carry: case sensitivity, whole words, scan depth, recursion,
group scoring):
a character book's ``scan_depth`` and ``recursive_scanning`` (the V2 spec's book fields), and a
Campfire bundle's ``lore_defaults`` (``book_defaults``), applied at import to each card
(``apply_book_defaults``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from engine.library.formats.draft import ImportedCard
from engine.library.reading.errors import ImportRejected
from engine.library.reading.fields import Fields
from engine.prompt.lore import (
    DEFAULT_DEPTH,
    DEFAULT_ORDER,
    LOGICS,
    MAX_SCAN_DEPTH,
    clean_lore,
    read_lore,
)

#: Options Campfire does not apply yet, each with the value that means "not used", and how the
#: preview names it.
_UNKEPT = {
    "delayUntilRecursion": (False, "delay until recursion"),
    "delay_until_recursion": (False, "delay until recursion"),
    "characterFilter": (None, "character filters"),
    "automationId": ("", "automation ids"),
    "automation_id": ("", "automation ids"),
    "vectorized": (False, "vector matching"),
    "ignoreBudget": (False, "ignore budget"),
    "outletName": ("", "outlets"),
}
#: SillyTavern's ``world_info_position`` (its ``world_info_position`` object: before 0, after 1,
#: ANTop 2, ANBottom 3, atDepth 4, EMTop 5, EMBottom 6, outlet 7) as a card's places.
_POSITIONS = {0: "before", 1: "after", 2: "an_top", 3: "an_bottom", 4: "depth"}
#: The character book spec's own two places.
_SPEC_POSITIONS = {"before_char": 0, "after_char": 1}
#: SillyTavern's places Campfire has not: the entries go where Campfire places cards.
_PLACES = {
    5: "example messages (top)",
    6: "example messages (bottom)",
    7: "an outlet",
}


class OptionReport:
    """What a book's entries asked for that their cards do not keep, counted for the preview."""

    def __init__(self) -> None:
        self.unkept: Counter[str] = Counter()
        self.places: Counter[str] = Counter()
        self.invalid: list[str] = []

    def warnings(self) -> list[str]:
        out: list[str] = []
        if self.places:
            shown = ", ".join(f"{where} ({n})" for where, n in self.places.most_common())
            out.append(
                "Entries placed at " + shown + " go where Campfire places cards: always-on ones "
                "before the story, the others after it."
            )
        if self.unkept:
            shown = ", ".join(f"{name} ({n})" for name, n in self.unkept.most_common())
            out.append(f"Options Campfire does not apply were left out: {shown}.")
        out.extend(self.invalid[:3])
        if len(self.invalid) > 3:
            out.append(f"… and {len(self.invalid) - 3} more entries with options not kept.")
        return out


def sillytavern_options(entry: dict[str, Any], report: OptionReport, where: str) -> dict[str, Any]:
    """The card options of a SillyTavern world-info entry, or of a character book's entry (its
    ``extensions`` read too)."""
    ext = entry.get("extensions")
    extra: dict[str, Any] = ext if isinstance(ext, dict) else {}

    def get(*names: str) -> Any:
        for name in names:
            for source in (entry, extra):
                if source.get(name) is not None:
                    return source[name]
        return None

    raw: dict[str, Any] = {}
    secondary = get("keysecondary", "secondary_keys")
    if secondary and get("selective") is not False:
        # SillyTavern applies secondary keys only to a selective entry (its default).
        raw["secondary"] = secondary
        logic = get("selectiveLogic")
        raw["logic"] = LOGICS[logic] if logic in range(len(LOGICS)) else logic
    use = get("useProbability")
    probability = get("probability")
    if probability is not None and use is not False:
        raw["probability"] = probability
    order = get("order", "insertion_order")
    if order is not None:
        raw["order"] = order
    for name, st_names in (
        ("case_sensitive", ("caseSensitive", "case_sensitive")),
        ("whole_words", ("matchWholeWords", "match_whole_words")),
        ("exclude_recursion", ("excludeRecursion", "exclude_recursion")),
    ):
        value = get(*st_names)
        if value is not None:
            raw[name] = value
    depth = get("scanDepth", "scan_depth")
    if isinstance(depth, int | float) and not isinstance(depth, bool):
        raw["scan_depth"] = max(0, int(depth) - 1)
    group = get("group")
    if group:
        raw["group"] = group
        for name, st_names in (
            ("group_weight", ("groupWeight", "group_weight")),
            ("group_override", ("groupOverride", "group_override")),
            ("group_scoring", ("useGroupScoring", "use_group_scoring")),
        ):
            value = get(*st_names)
            if value is not None:
                raw[name] = value
    for name in ("sticky", "cooldown", "delay"):
        # Counted in chat messages there, in story entries here: the same count.
        value = get(name)
        if value:
            raw[name] = value
    raw["recurse"] = get("preventRecursion", "prevent_recursion") is not True
    raw |= _place(entry, extra, get("constant") is True, report)
    _count_unkept(entry, extra, report)
    return _clean(raw, report, where)


def novelai_options(entry: dict[str, Any], report: OptionReport, where: str) -> dict[str, Any]:
    """The card options of a NovelAI lorebook entry: its insertion order and cascading
    activation (every entry's text is scanned; only a cascading entry is triggered by it)."""
    raw: dict[str, Any] = {"recurse": True}
    order = entry.get("insertionOrder")
    if order is not None:
        raw["order"] = order
    if entry.get("cascadingActivation") is not True:
        raw["exclude_recursion"] = True
    if entry.get("nonStoryActivatable"):
        report.unkept["non-story activation"] += 1
    search = entry.get("searchRange")
    if search not in (None, 1000):
        report.unkept["search range in characters"] += 1
    return _clean(raw, report, where)


def kobold_options(entry: dict[str, Any], report: OptionReport, where: str) -> dict[str, Any]:
    """The card options of a KoboldAI or KoboldAI Lite world-info entry (``engine.library.
    formats.kobold`` says how they match there): keys found inside words; a selective entry's
    secondary keys with AND ANY; Lite's anti-keys with NOT ANY when there are no secondary keys
    (else named as not kept); Lite's probability."""
    raw: dict[str, Any] = {"whole_words": False}
    if entry.get("selective") is True:
        secondary = _kobold_keys(entry.get("keysecondary"))
        anti = _kobold_keys(entry.get("keyanti"))
        if secondary:
            raw |= {"secondary": secondary, "logic": "and_any"}
            if anti:
                report.unkept["anti-keys beside secondary keys"] += 1
        elif anti:
            raw |= {"secondary": anti, "logic": "not_any"}
    probability = entry.get("probability")
    if isinstance(probability, int | float) and not isinstance(probability, bool):
        # Lite rolls only for 0 < probability < 100 (0 reads as unset there: always in).
        if 0 < probability < 100:
            raw["probability"] = int(probability)
    return _clean(raw, report, where)


def _kobold_keys(value: Any) -> list[str]:
    # One comma-separated text in the client and Lite, a list in United.
    parts = value.split(",") if isinstance(value, str) else value
    if not isinstance(parts, list):
        return []
    return [part.strip() for part in parts if isinstance(part, str) and part.strip()]


def _count_unkept(entry: dict[str, Any], extra: dict[str, Any], report: OptionReport) -> None:
    for source in (entry, extra):
        for name, (unused, label) in _UNKEPT.items():
            value = source.get(name)
            if value not in (None, unused) and value != [] and value != {}:
                if name == "characterFilter" and not (
                    isinstance(value, dict) and (value.get("names") or value.get("tags"))
                ):
                    continue
                report.unkept[label] += 1
    position = _position(entry, extra)
    if position in _PLACES:
        report.places[_PLACES[position]] += 1


def _position(entry: dict[str, Any], extra: dict[str, Any]) -> int | None:
    """SillyTavern's number for the entry's place: ``extensions.position`` first, else the
    entry's own (a number in a world-info file, a word in a character book)."""
    for value in (extra.get("position"), entry.get("position")):
        if isinstance(value, str):
            value = _SPEC_POSITIONS.get(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _place(
    entry: dict[str, Any], extra: dict[str, Any], constant: bool, report: OptionReport
) -> dict[str, Any]:
    """The card's ``position`` (and ``depth``), unless it is where Campfire puts it anyway."""
    position = _position(entry, extra)
    place = _POSITIONS.get(position) if position is not None else None
    if place is None or place == ("before" if constant else "after"):
        return {}
    if place != "depth":
        return {"position": place}
    role = extra.get("role", entry.get("role"))
    if role not in (None, 0):
        # SillyTavern sends a depth's entries as a message of their own, as the system, the
        # user or the assistant; here they are story text.
        report.unkept["message roles at a depth"] += 1
    depth = extra.get("depth", entry.get("depth"))
    return {"position": "depth", "depth": DEFAULT_DEPTH if depth is None else depth}


def _clean(raw: dict[str, Any], report: OptionReport, where: str) -> dict[str, Any]:
    warnings: list[str] = []
    out = clean_lore(raw, warnings, where=f"{where}: ")
    report.invalid.extend(warnings)
    return out


def character_book_options(stored: dict[str, Any], *, always_on: bool = False) -> dict[str, Any]:
    """A card's options as a character book entry writes them (the spec's fields, SillyTavern's
    under ``extensions``): what ``sillytavern_options`` reads back. Its regular-expression keys
    go with its keys (``regex_keys``), as SillyTavern writes them. Its place is written as
    where it goes (``always_on``: an unplaced card goes before the story), so SillyTavern puts
    it there too."""
    lore = read_lore(stored)
    place = lore.position or ("before" if always_on else "after")
    number = next(n for n, name in _POSITIONS.items() if name == place)
    out: dict[str, Any] = {"position": "before_char" if number == 0 else "after_char"}
    ext: dict[str, Any] = {"prevent_recursion": not lore.recurse, "position": number}
    if place == "depth":
        ext["depth"] = lore.depth
    if lore.secondary:
        out |= {"secondary_keys": list(lore.secondary), "selective": True}
        ext["selectiveLogic"] = LOGICS.index(lore.logic)
    if lore.order != DEFAULT_ORDER:
        out["insertion_order"] = lore.order
    if lore.case_sensitive is not None:
        out["case_sensitive"] = lore.case_sensitive
    if lore.disabled:
        out["enabled"] = False
    if lore.whole_words is not None:
        ext["match_whole_words"] = lore.whole_words
    if lore.probability != 100:
        ext |= {"probability": lore.probability, "useProbability": True}
    if lore.scan_depth is not None:
        ext["scan_depth"] = lore.scan_depth + 1
    if lore.exclude_recursion:
        ext["exclude_recursion"] = True
    for name in ("sticky", "cooldown", "delay"):
        if getattr(lore, name):
            ext[name] = getattr(lore, name)
    if lore.groups:
        ext |= {"group": ",".join(lore.groups), "group_weight": lore.group_weight}
        ext["group_override"] = lore.group_override
        if lore.group_scoring:
            ext["use_group_scoring"] = True
    out["extensions"] = ext
    return out


def regex_keys(stored: dict[str, Any]) -> list[str]:
    return list(read_lore(stored).regex)


#: The options a book sets for its entries: SillyTavern's global world-info settings.
BOOK_OPTIONS = ("case_sensitive", "whole_words", "scan_depth", "recurse", "group_scoring")


def book_defaults(f: Fields, name: str = "lore_defaults") -> dict[str, Any]:
    """A bundle's book-level options (``BOOK_OPTIONS``), checked as a bundle's fields are: a
    wrong one refuses the file with its path."""
    book = f.obj(name)
    if book is None:
        return {}
    unknown = sorted(str(key) for key in book.raw if key not in BOOK_OPTIONS)
    if unknown:
        raise ImportRejected(
            f"{book.path}: unknown option(s) {', '.join(unknown[:8])} (one of "
            f"{', '.join(BOOK_OPTIONS)})."
        )
    out: dict[str, Any] = {
        key: book.flag(key)
        for key in ("case_sensitive", "whole_words", "recurse", "group_scoring")
        if book.has(key)
    }
    if book.has("scan_depth"):
        out["scan_depth"] = book.integer("scan_depth", low=0, high=MAX_SCAN_DEPTH)
    return out


def character_book_defaults(book: dict[str, Any]) -> dict[str, Any]:
    """A character book's own ``scan_depth`` (counted as SillyTavern counts an entry's, less
    one) and ``recursive_scanning`` (off: no entry's text triggers another, whatever the entry
    says, as SillyTavern's global recursion switch). Malformed values are the spec's absent."""
    out: dict[str, Any] = {}
    depth = book.get("scan_depth")
    if isinstance(depth, int | float) and not isinstance(depth, bool) and depth >= 1:
        out["scan_depth"] = min(MAX_SCAN_DEPTH, int(depth) - 1)
    if book.get("recursive_scanning") is False:
        out["recurse"] = False
    return out


def apply_book_defaults(
    cards: list[ImportedCard], defaults: dict[str, Any], *, forced: tuple[str, ...] = ()
) -> None:
    """Give each card the book's ``defaults`` for the options it does not set itself;
    ``forced`` ones replace the card's (a book that turns recursion off). A card's options
    that are not an object are left for ``clean_lore`` to name."""
    for card in cards:
        if isinstance(card.lore, dict):
            kept = {key: value for key, value in card.lore.items() if key not in forced}
            card.lore = {**defaults, **kept}
