"""Lorebooks read as story cards: SillyTavern world info, NovelAI lorebooks and the
``character_book`` of a Character Card V2 (or V3) file (``character_card`` reads the rest of the
card), or such a book on its own.

- SillyTavern: ``{"entries": {"0": {uid, key: [...], keysecondary, comment, content,
  constant, disable, order, …}}}`` (``entries`` is an object keyed by uid; some tools write a
  list). ``comment`` is the entry's title.
- NovelAI: ``{"lorebookVersion": n, "entries": [{text, displayName, keys: [...], enabled,
  forceActivation, …}], "categories": [...]}``.
- Character Card V2: ``{"spec": "chara_card_v2", "data": {name, description, personality,
  scenario, first_mes, …, "character_book": {name, scan_depth, recursive_scanning, entries:
  [{keys, content, enabled, constant, name, comment, …}]}}}``; the book's scan depth and
  recursion apply to its entries (``lorebook_options.character_book_defaults``).

Disabled entries are left out (and counted in a warning); always-inserted entries (constant,
forceActivation) become always-on cards; the entries' other options become the cards'
world-info options (``lorebook_options``), and what a card cannot keep is named in a warning.
"""

from __future__ import annotations

from typing import Any

from engine.library.formats.draft import ImportedCard, ScenarioDraft
from engine.library.formats.lorebook_options import (
    OptionReport,
    apply_book_defaults,
    character_book_defaults,
    novelai_options,
    sillytavern_options,
)
from engine.library.reading.fields import Fields


def is_sillytavern(raw: dict[str, Any]) -> bool:
    entries = raw.get("entries")
    values = list(entries.values()) if isinstance(entries, dict) else entries
    return isinstance(values, list) and any(
        isinstance(e, dict) and "content" in e and ("key" in e or "uid" in e) for e in values
    )


def is_novelai(raw: dict[str, Any]) -> bool:
    entries = raw.get("entries")
    return "lorebookVersion" in raw or (
        isinstance(entries, list)
        and any(isinstance(e, dict) and "text" in e and "keys" in e for e in entries)
    )


def is_character_book(raw: dict[str, Any]) -> bool:
    entries = raw.get("entries")
    return isinstance(entries, list) and any(
        isinstance(e, dict) and "content" in e and "keys" in e for e in entries
    )


def read_sillytavern(raw: dict[str, Any], *, title: str, warnings: list[str]) -> ScenarioDraft:
    f = Fields(raw, "")
    cards, skipped, report = [], 0, OptionReport()
    for path, item in f.items("entries"):
        e = Fields(item, path)
        if e.flag("disable"):
            skipped += 1
            continue
        named = e.text("comment", "name")
        cards.append(
            ImportedCard(
                title=named,
                keys=",".join(e.words("key", "keys")),
                entry=e.text("content"),
                always_on=e.flag("constant"),
                lore=sillytavern_options(e.raw, report, _where(path, named)),
            )
        )
    _skipped(skipped, warnings)
    warnings.extend(report.warnings())
    return ScenarioDraft(title=f.text("name", default=title), cards=cards)


def read_novelai(raw: dict[str, Any], *, title: str, warnings: list[str]) -> ScenarioDraft:
    f = Fields(raw, "")
    # Categories only name the cards' types: a malformed list costs the names, not the import.
    listed = raw.get("categories")
    categories: dict[str, str] = {
        str(c.get("id")): c["name"]
        for c in (listed if isinstance(listed, list) else [])
        if isinstance(c, dict) and isinstance(c.get("name"), str)
    }
    cards, skipped, report = [], 0, OptionReport()
    for path, item in f.items("entries"):
        e = Fields(item, path)
        if not e.flag("enabled", default=True):
            skipped += 1
            continue
        category = categories.get(str(e.raw.get("category")), "") if e.has("category") else ""
        cards.append(
            ImportedCard(
                title=e.text("displayName"),
                keys=",".join(e.words("keys")),
                entry=e.text("text"),
                type=category[:32] or "custom",
                always_on=e.flag("forceActivation"),
                lore=novelai_options(e.raw, report, _where(path, e.text("displayName"))),
            )
        )
    _skipped(skipped, warnings)
    warnings.extend(report.warnings())
    return ScenarioDraft(title=title, cards=cards)


def read_character_book(raw: dict[str, Any], *, title: str, warnings: list[str]) -> ScenarioDraft:
    f = Fields(raw, "")
    return ScenarioDraft(title=f.text("name", default=title), cards=_book_entries(f, warnings))


def _book_entries(book: Fields, warnings: list[str]) -> list[ImportedCard]:
    cards, skipped, report = [], 0, OptionReport()
    for path, item in book.items("entries"):
        e = Fields(item, path)
        if not e.flag("enabled", default=True):
            skipped += 1
            continue
        named = e.text("name", "comment")
        cards.append(
            ImportedCard(
                title=named,
                keys=",".join(e.words("keys")),
                entry=e.text("content"),
                always_on=e.flag("constant"),
                lore=sillytavern_options(e.raw, report, _where(path, named)),
            )
        )
    _skipped(skipped, warnings)
    warnings.extend(report.warnings())
    defaults = character_book_defaults(book.raw)
    apply_book_defaults(cards, defaults, forced=("recurse",) if "recurse" in defaults else ())
    return cards


def _where(path: str, title: str) -> str:
    """How a warning names an entry: its title, else its place in the file."""
    return f"Entry “{title[:40]}”" if title.strip() else path


def _skipped(count: int, warnings: list[str]) -> None:
    if count:
        warnings.append(f"{count} disabled entr{'y was' if count == 1 else 'ies were'} left out.")
