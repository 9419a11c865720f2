"""A chapter's ids in the scenario's own words, for people: "lamp_room" → "lamp room",
"met_wren" → "met Wren".

A plan names its fields and the values of its sets by ids (lower-case letters, digits and _,
``plan.NAME``): the model reports them and the code folds them, so they stay ids in the prompt
and Insights. A person reads a chapter's tally (``recaps.facts_lines``) in words. The
scenario gives chapters and beats titles, used as written, but no label for a field or a value,
so an id reads as its parts, each spelt as the chapter's own text (its title, notes, events'
descriptions, beats) spells that word: capitalised where the text only ever capitalises it
inside a sentence (a name: "Wren"), else as in the id.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
# What stands before a word that opens a sentence (or a line, a quote, a heading's text).
_OPENING = re.compile(r"(^|[.!?:;\"“(\n])\s*$")


def chapter_words(chapter: Mapping[str, Any]) -> dict[str, str]:
    """Each field and set value of the plan's ``chapter``, by id, in words."""
    names = _names_in(chapter)
    words: dict[str, str] = {}
    for event in chapter.get("events", {}).values():
        for name in [event.get("field", ""), *event.get("values", [])]:
            if name:
                words[name] = humanised(name, names)
    return words


def humanised(name: str, names: Mapping[str, str] | None = None) -> str:
    """An id as words: its parts apart, each spelt as ``names`` spells it (lower case → the
    scenario's spelling), else as in the id."""
    known = names or {}
    parts = [part for part in name.split("_") if part]
    return " ".join(known.get(part, part) for part in parts) or name


def _names_in(chapter: Mapping[str, Any]) -> dict[str, str]:
    """The words the chapter's text capitalises inside sentences and never writes in lower case
    (a sentence's first word says nothing: "The" is no name)."""
    capitalised: dict[str, str] = {}
    lower: set[str] = set()
    for text in _texts(chapter):
        for match in _WORD.finditer(text):
            word = match[0]
            if word.islower():
                lower.add(word)
            elif word[:1].isupper() and word[1:].islower() and not _opens(text, match.start()):
                capitalised.setdefault(word.lower(), word)
    return {key: word for key, word in capitalised.items() if key not in lower}


def _opens(text: str, at: int) -> bool:
    return _OPENING.search(text[max(0, at - 4) : at]) is not None or at == 0


def _texts(chapter: Mapping[str, Any]) -> Iterator[str]:
    yield str(chapter.get("title", ""))
    yield str(chapter.get("notes", ""))
    yield str(chapter.get("epilogue", ""))
    for event in chapter.get("events", {}).values():
        yield str(event.get("about", ""))
    for beat in chapter.get("beats", []):
        yield str(beat.get("title", ""))
        yield str(beat.get("notes", ""))
        yield from (str(hint) for hint in beat.get("hints", []))
