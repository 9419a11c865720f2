"""A scenario's chapters and beats: what an author writes, read and checked once.

In a bundle (``engine.library.formats.bundle``) a scenario may carry::

    "nudge_after": 5,                       # stalled turns before a nudge (optional)
    "chapters": [
      {"id": "shore", "title": "The Drowned Shore",
       "notes": "for the narrator, the whole chapter",
       "events": {                          # the chapter's closed vocabulary
         "found_clue": {"fold": "counter", "field": "clues", "max": 3,
                        "about": "the party finds a clue about the keeper"},
         "visited":    {"fold": "set", "field": "places", "values": ["dock", "cave"]},
         "met_keeper": {"fold": "flag", "field": "met"}},
       "beats": [
         {"id": "arrive", "title": "Find the keeper's trail",
          "notes": "for the narrator, while this beat is open",
          "hints": ["in-world nudges toward the beat"],
          "complete": {"all": [{"field": "clues", "at_least": 2},
                               {"any": [{"field": "places", "has": "cave"},
                                        {"field": "met", "is": true}]}]},
          "nudge_after": 4, "fallback": ["..."]}],
       "epilogue": "only on the last chapter", "fallback": ["..."]}]

The model may report only the events of the open chapter; code folds them into the chapter's
fields (``counter``: +1 a turn, up to ``max``; ``set``: adds one of ``values``; ``flag``: set
true) and decides, from the fields alone, when the open beat's ``complete`` test holds
(``engine.story.chapters.progress``). ``fallback`` lines are kept for the authored-fallback feature
and not used here.

The checked plan is plain JSON (what the database stores): the same shape, every default
filled in, text sanitised and capped.
"""

from __future__ import annotations

import re
from typing import Any

from engine.library.reading.errors import ImportRejected
from engine.library.reading.fields import Fields, kind_of
from engine.platform.sanitise import sanitise

#: Stalled turns before the narrator is nudged toward the open beat, unless the author says.
DEFAULT_NUDGE_AFTER = 5
MAX_CHAPTERS = 20
MAX_BEATS = 12
MAX_EVENTS = 24
MAX_SET_VALUES = 24
MAX_HINTS = 6
MAX_FALLBACK = 8
MAX_TESTS = 12
MAX_DEPTH = 3
TITLE_MAX = 100
NOTES_MAX = 1500
LINE_MAX = 300
EPILOGUE_MAX = 2000

FOLDS = ("counter", "set", "flag")
#: Ids of chapters and beats, names of events and fields, values of a set: short and plain,
#: so they read the same in a prompt, a block and a custom id.
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}\Z")


def read_plan(raw: dict[str, Any], path: str = "") -> dict[str, Any]:
    """The checked plan of a bundle's ``chapters`` (and ``nudge_after``); ``{}`` without any.

    Raises ``ImportRejected`` naming the first problem and where it is."""
    f = Fields(raw, path)
    entries = f.items("chapters")
    if not entries:
        return {}
    if len(entries) > MAX_CHAPTERS:
        raise ImportRejected(f"{f.at('chapters')}: at most {MAX_CHAPTERS} chapters.")
    nudge = f.integer("nudge_after", default=DEFAULT_NUDGE_AFTER, low=1, high=100)
    chapters = [_chapter(p, item) for p, item in entries]
    _unique([c["id"] for c in chapters], f.at("chapters"), "chapter id")
    for chapter in chapters[:-1]:
        if chapter["epilogue"]:
            raise ImportRejected(
                f"Chapter “{chapter['id']}”: only the final chapter may carry an epilogue."
            )
    return {"nudge_after": nudge, "chapters": chapters}


def _chapter(path: str, raw: Any) -> dict[str, Any]:
    f = Fields(raw, path)
    chapter_id = _name(f, "id")
    events: dict[str, dict[str, Any]] = {}
    entries = f.items("events")
    if not entries:
        raise ImportRejected(f"{f.at('events')}: a chapter needs at least one event.")
    if len(entries) > MAX_EVENTS:
        raise ImportRejected(f"{f.at('events')}: at most {MAX_EVENTS} events a chapter.")
    event_obj = f.mapping("events")
    if not event_obj:
        raise ImportRejected(f"{f.at('events')}: expected an object of events by name.")
    for name, item in event_obj.items():
        where = f"{f.at('events')}.{name}"
        if not isinstance(name, str) or not NAME.match(name):
            raise ImportRejected(f"{where}: an event's name is lower-case letters, digits and _.")
        events[name] = _event(where, item)
    fields: dict[str, str] = {}
    for name, event in events.items():
        known = fields.setdefault(event["field"], event["fold"])
        if known != event["fold"]:
            raise ImportRejected(
                f"{f.at('events')}.{name}: field “{event['field']}” is folded both as "
                f"{known} and as {event['fold']}."
            )
    beats = [_beat(p, item, fields, events) for p, item in f.items("beats")]
    if not beats:
        raise ImportRejected(f"{f.at('beats')}: a chapter needs at least one beat.")
    if len(beats) > MAX_BEATS:
        raise ImportRejected(f"{f.at('beats')}: at most {MAX_BEATS} beats a chapter.")
    _unique([b["id"] for b in beats], f.at("beats"), "beat id")
    return {
        "id": chapter_id,
        "title": _line(f, "title", TITLE_MAX, default=chapter_id),
        "notes": _line(f, "notes", NOTES_MAX),
        "events": events,
        "beats": beats,
        "epilogue": _line(f, "epilogue", EPILOGUE_MAX),
        "fallback": _lines(f, "fallback", MAX_FALLBACK),
    }


def _event(path: str, raw: Any) -> dict[str, Any]:
    f = Fields(raw, path)
    fold = f.text("fold").strip()
    if fold not in FOLDS:
        raise ImportRejected(f"{f.at('fold')}: expected one of {', '.join(FOLDS)}.")
    event: dict[str, Any] = {
        "fold": fold,
        "field": _name(f, "field"),
        "about": _line(f, "about", LINE_MAX),
    }
    if fold == "counter":
        event["max"] = f.integer("max", default=None, low=1, high=1000)
    if fold == "set":
        values = [value.strip() for value in f.words("values")]
        if not values:
            raise ImportRejected(f"{f.at('values')}: a set event lists the values it may add.")
        if len(values) > MAX_SET_VALUES:
            raise ImportRejected(f"{f.at('values')}: at most {MAX_SET_VALUES} values.")
        for value in values:
            if not NAME.match(value):
                raise ImportRejected(
                    f"{f.at('values')}: “{value[:40]}” is not lower-case letters, digits and _."
                )
        _unique(values, f.at("values"), "value")
        event["values"] = values
    return event


def _beat(
    path: str, raw: Any, fields: dict[str, str], events: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    f = Fields(raw, path)
    beat_id = _name(f, "id")
    complete = f.obj("complete")
    if complete is None:
        raise ImportRejected(f"{f.at('complete')}: a beat needs the test that completes it.")
    return {
        "id": beat_id,
        "title": _line(f, "title", TITLE_MAX, default=beat_id),
        "notes": _line(f, "notes", NOTES_MAX),
        "hints": _lines(f, "hints", MAX_HINTS),
        "complete": _condition(complete, fields, events, 0),
        "nudge_after": f.integer("nudge_after", default=None, low=1, high=100),
        "fallback": _lines(f, "fallback", MAX_FALLBACK),
    }


def _condition(
    f: Fields, fields: dict[str, str], events: dict[str, dict[str, Any]], depth: int
) -> dict[str, Any]:
    """``{"all": [...]}`` or ``{"any": [...]}`` of tests or of nested conditions."""
    if depth >= MAX_DEPTH:
        raise ImportRejected(f"{f.path}: conditions nest at most {MAX_DEPTH} deep.")
    joins = [key for key in ("all", "any") if key in f.raw]
    if len(joins) != 1 or len(f.raw) != 1:
        raise ImportRejected(f'{f.path}: expected {{"all": [...]}} or {{"any": [...]}}.')
    join = joins[0]
    items = f.items(join)
    if not items or len(items) > MAX_TESTS:
        raise ImportRejected(f"{f.at(join)}: between 1 and {MAX_TESTS} tests.")
    tests = []
    for p, item in items:
        inner = Fields(item, p)
        if "all" in inner.raw or "any" in inner.raw:
            tests.append(_condition(inner, fields, events, depth + 1))
        else:
            tests.append(_test(inner, fields, events))
    return {join: tests}


def _test(f: Fields, fields: dict[str, str], events: dict[str, dict[str, Any]]) -> dict[str, Any]:
    field = _name(f, "field")
    fold = fields.get(field)
    if fold is None:
        raise ImportRejected(f"{f.at('field')}: no event of this chapter folds into “{field}”.")
    ops = [key for key in ("at_least", "is", "has") if key in f.raw]
    if len(ops) != 1 or len(f.raw) != 2:
        raise ImportRejected(f"{f.path}: a test is a field and one of at_least, is, has.")
    op = ops[0]
    if op == "at_least":
        if fold == "flag":
            raise ImportRejected(f"{f.at(op)}: “{field}” is a flag; test it with is.")
        return {"field": field, "at_least": f.integer(op, low=0, high=1000)}
    if op == "is":
        if fold != "flag":
            raise ImportRejected(f"{f.at(op)}: only a flag is tested with is.")
        return {"field": field, "is": f.flag(op)}
    if fold != "set":
        raise ImportRejected(f"{f.at(op)}: only a set is tested with has.")
    value = f.text(op).strip()
    allowed = {v for e in events.values() if e["field"] == field for v in e.get("values", [])}
    if value not in allowed:
        raise ImportRejected(f"{f.at(op)}: “{value[:40]}” is never added to “{field}”.")
    return {"field": field, "has": value}


def _name(f: Fields, key: str) -> str:
    value = f.text(key).strip()
    if not NAME.match(value):
        raise ImportRejected(
            f"{f.at(key)}: expected a name of lower-case letters, digits and _ "
            f"(at most 40), found “{value[:40]}”."
        )
    return value


def _line(f: Fields, key: str, cap: int, *, default: str = "") -> str:
    text = sanitise(f.text(key, default=default)).strip()
    if len(text) > cap:
        raise ImportRejected(f"{f.at(key)}: at most {cap:,} characters ({len(text):,} given).")
    return text


def _lines(f: Fields, key: str, most: int) -> list[str]:
    _, value = f.first(key)
    if value is not None and not isinstance(value, list):
        raise ImportRejected(f"{f.at(key)}: expected a list of text, found {kind_of(value)}.")
    lines = [sanitise(line).strip() for line in f.words(key)] if value is not None else []
    lines = [line for line in lines if line]
    if len(lines) > most:
        raise ImportRejected(f"{f.at(key)}: at most {most} lines.")
    for line in lines:
        if len(line) > LINE_MAX:
            raise ImportRejected(f"{f.at(key)}: a line holds at most {LINE_MAX} characters.")
    return lines


def _unique(names: list[str], where: str, what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ImportRejected(f"{where}: the {what} “{name}” is used twice.")
        seen.add(name)


def write_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """The bundle keys that carry ``plan`` (a checked plan reads back as itself)."""
    if not plan:
        return {}
    return {"nudge_after": plan["nudge_after"], "chapters": plan["chapters"]}
