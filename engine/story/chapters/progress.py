"""Where an adventure stands in its chapters, and how a turn's reported events move it: pure.

Progress is a plain JSON object kept in the world state under ``"chapters"`` (so every
snapshot holds it, and undo, retry and branch switches rewind it)::

    {"chapter": 0, "beat": 1, "fields": {"clues": 2, "places": ["dock"], "met": false},
     "stalled": 3, "turn": 4, "from_turn": 1, "from_index": 0,
     "beats_done": [{"id": "arrive", "title": …, "at": 2}], "done": false}

``turn`` counts the turns folded on this line, so it is the turn's number as players see it
(Insights' "turn 4"); ``from_turn`` is the open chapter's first turn, ``from_index`` the story
index it began after (the recap reads the story from there).

The rules, all decided here in code from the fields, never from the model's prose:

* an event is accepted only if it is in the open chapter's vocabulary (a ``set`` event's value
  among its values), at most ``MAX_EVENTS_PER_TURN`` a turn; anything else is refused and
  changes nothing;
* the same event twice in one turn counts once; a counter goes up by one a turn per event (up
  to its ``max``); a flag already set and a value already in its set change nothing;
* after the fold the open beat's test is evaluated; at most one beat is completed per turn (a
  beat is never skipped: the next one gets at least one turn with its own notes), and a beat
  once completed is never completed again;
* completing a chapter's last beat ends the chapter: the next one opens with fresh fields, or,
  after the final chapter, the plan is done;
* a turn that changes no field and completes no beat is a stalled turn; after ``nudge_after``
  of them (the beat's, else the plan's) the narrator is nudged with the beat's next hint, and
  again every ``nudge_after`` stalled turns.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from engine.story.chapters.plan import DEFAULT_NUDGE_AFTER, NAME
from engine.story.chapters.words import chapter_words

#: The world state's key for the progress.
PROGRESS_KEY = "chapters"
#: Reported events beyond this many in one turn are refused.
MAX_EVENTS_PER_TURN = 8
#: A refused event is quoted to Insights at most this long.
QUOTED_MAX = 60


def initial_fields(chapter: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for event in chapter["events"].values():
        kind = event["fold"]
        empty: Any = 0 if kind == "counter" else [] if kind == "set" else False
        fields.setdefault(event["field"], empty)
    return fields


def initial_progress(plan: dict[str, Any]) -> dict[str, Any]:
    return {
        "chapter": 0,
        "beat": 0,
        "fields": initial_fields(plan["chapters"][0]),
        "stalled": 0,
        "turn": 0,
        "from_turn": 1,
        "from_index": 0,
        "beats_done": [],
        "done": False,
    }


def repaired(plan: dict[str, Any], progress: Any) -> dict[str, Any]:
    """A well-formed copy of ``progress`` for ``plan`` (a file brought in may hold anything)."""
    chapters = plan["chapters"]
    if not isinstance(progress, dict):
        return initial_progress(plan)
    out = copy.deepcopy(progress)
    index = out.get("chapter")
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(chapters):
        return initial_progress(plan)
    chapter = chapters[index]
    beat = out.get("beat")
    if not isinstance(beat, int) or isinstance(beat, bool) or not 0 <= beat < len(chapter["beats"]):
        out["beat"] = 0
    fresh = initial_fields(chapter)
    fields = out.get("fields")
    if not isinstance(fields, dict):
        fields = {}
    for name, default in fresh.items():
        value = fields.get(name)
        if type(value) is not type(default):
            fields[name] = default
    out["fields"] = {name: fields[name] for name in fresh}
    for key in ("stalled", "turn", "from_turn", "from_index"):
        value = out.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            out[key] = 0
    if not isinstance(out.get("beats_done"), list):
        out["beats_done"] = []
    out["done"] = out.get("done") is True
    return out


@dataclass(frozen=True, slots=True)
class EventOutcome:
    """One reported event and what became of it (Insights lists them)."""

    event: str
    accepted: bool
    reason: str


@dataclass(frozen=True, slots=True)
class ChapterEnd:
    """A chapter the turn ended, with what the engine knows of it (the recap's facts)."""

    index: int
    chapter_id: str
    title: str
    final: bool
    epilogue: str
    facts: dict[str, Any]
    #: The chapter's fields and values in the scenario's words, for the recap call.
    words: dict[str, str] = field(default_factory=dict)


@dataclass
class Fold:
    """What one turn's events did."""

    progress: dict[str, Any]
    outcomes: list[EventOutcome] = field(default_factory=list)
    #: Whether a field changed (what ends a stall).
    changed: bool = False
    #: The beat the turn completed: {"id", "title", "at"}.
    beat_done: dict[str, Any] | None = None
    chapter_end: ChapterEnd | None = None
    #: The chapter that opened after ``chapter_end`` (its title), if any.
    opened: str = ""


def _parse(raw: Any) -> tuple[str, str | None] | str:
    """(name, value) of a reported event, or why it cannot be one."""
    if isinstance(raw, dict):
        name, value = raw.get("event"), raw.get("value")
        if set(raw) - {"event", "value"}:
            return "an event object holds only event and value"
    elif isinstance(raw, str):
        name, _, value = raw.strip().partition(":")
        value = value or None
    else:
        return "not an event name"
    if not isinstance(name, str) or not NAME.match(name.strip()):
        return "not an event name"
    if value is not None and (not isinstance(value, str) or not NAME.match(value.strip())):
        return "not a value an event can carry"
    return name.strip(), value.strip() if isinstance(value, str) else None


def _quoted(raw: Any) -> str:
    text = raw if isinstance(raw, str) else repr(raw)
    return text[:QUOTED_MAX]


def fold(plan: dict[str, Any], progress: Any, events: Any, *, turn_index: int) -> Fold:
    """Apply one turn's reported events to ``progress`` (never mutated); never raises on what
    a model sends. ``turn_index`` is the story index of the turn's narration."""
    state = repaired(plan, progress)
    result = Fold(progress=state)
    reported = events if isinstance(events, list) else []
    if state["done"]:
        result.outcomes = [
            EventOutcome(_quoted(raw), False, "the chapters are finished") for raw in reported
        ]
        return result
    state["turn"] += 1
    chapter = plan["chapters"][state["chapter"]]
    vocabulary = chapter["events"]
    fields = state["fields"]
    seen: set[tuple[str, str | None]] = set()
    for n, raw in enumerate(reported):
        shown = _quoted(raw)
        if n >= MAX_EVENTS_PER_TURN:
            result.outcomes.append(
                EventOutcome(shown, False, f"more than {MAX_EVENTS_PER_TURN} events in a turn")
            )
            continue
        parsed = _parse(raw)
        if isinstance(parsed, str):
            result.outcomes.append(EventOutcome(shown, False, parsed))
            continue
        name, value = parsed
        event = vocabulary.get(name)
        if event is None:
            result.outcomes.append(
                EventOutcome(shown, False, f"not an event of chapter “{chapter['title']}”")
            )
            continue
        if event["fold"] == "set":
            if value is None or value not in event["values"]:
                result.outcomes.append(
                    EventOutcome(shown, False, f"{name} takes one of {', '.join(event['values'])}")
                )
                continue
        elif value is not None:
            result.outcomes.append(EventOutcome(shown, False, f"{name} carries no value"))
            continue
        if (name, value) in seen:
            result.outcomes.append(EventOutcome(shown, False, "reported twice this turn"))
            continue
        seen.add((name, value))
        changed, reason = _apply(event, fields, value)
        result.changed |= changed
        result.outcomes.append(EventOutcome(shown, True, reason))
    _advance(plan, state, result, turn_index)
    return result


def _apply(event: dict[str, Any], fields: dict[str, Any], value: str | None) -> tuple[bool, str]:
    name, fold_kind = event["field"], event["fold"]
    if fold_kind == "counter":
        cap = event.get("max")
        if cap is not None and fields[name] >= cap:
            return False, f"{name} is at its most ({cap})"
        fields[name] += 1
        return True, f"{name} {fields[name] - 1} → {fields[name]}"
    if fold_kind == "flag":
        if fields[name]:
            return False, f"{name} was already set"
        fields[name] = True
        return True, f"{name} set"
    if value in fields[name]:
        return False, f"{name} already holds {value}"
    fields[name] = [*fields[name], value]
    return True, f"{name} + {value}"


def holds(condition: dict[str, Any], fields: dict[str, Any]) -> bool:
    """Whether a beat's ``complete`` test holds for ``fields``."""
    join = "all" if "all" in condition else "any"
    results = (
        holds(test, fields) if ("all" in test or "any" in test) else _test(test, fields)
        for test in condition[join]
    )
    return all(results) if join == "all" else any(results)


def _test(test: dict[str, Any], fields: dict[str, Any]) -> bool:
    value = fields.get(test["field"])
    if "at_least" in test:
        amount = len(value) if isinstance(value, list) else value
        return isinstance(amount, int) and amount >= test["at_least"]
    if "is" in test:
        return bool(value) is test["is"]
    return isinstance(value, list) and test["has"] in value


def _advance(plan: dict[str, Any], state: dict[str, Any], result: Fold, turn_index: int) -> None:
    chapters = plan["chapters"]
    chapter = chapters[state["chapter"]]
    beat = chapter["beats"][state["beat"]]
    if not holds(beat["complete"], state["fields"]):
        state["stalled"] = 0 if result.changed else state["stalled"] + 1
        return
    done = {"id": beat["id"], "title": beat["title"], "at": state["turn"]}
    result.beat_done = done
    state["beats_done"] = [*state["beats_done"], done]
    state["stalled"] = 0
    if state["beat"] + 1 < len(chapter["beats"]):
        state["beat"] += 1
        return
    final = state["chapter"] + 1 >= len(chapters)
    result.chapter_end = ChapterEnd(
        index=state["chapter"],
        chapter_id=chapter["id"],
        title=chapter["title"],
        final=final,
        epilogue=chapter["epilogue"] if final else "",
        facts={
            "number": state["chapter"] + 1,
            "of": len(chapters),
            "beats": state["beats_done"],
            "fields": copy.deepcopy(state["fields"]),
            "from_turn": state["from_turn"],
            "to_turn": state["turn"],
            "from_index": state["from_index"],
        },
        words=chapter_words(chapter),
    )
    if final:
        state["done"] = True
        return
    following = chapters[state["chapter"] + 1]
    state.update(
        chapter=state["chapter"] + 1,
        beat=0,
        fields=initial_fields(following),
        from_turn=state["turn"] + 1,
        from_index=turn_index,
        beats_done=[],
    )
    result.opened = following["title"]


@dataclass(frozen=True, slots=True)
class Nudge:
    text: str
    #: For Insights: when and why.
    reason: str


def nudge_for(plan: dict[str, Any], progress: Any) -> Nudge | None:
    """The nudge the next turn's narrator gets, if the open beat has stalled long enough."""
    state = repaired(plan, progress)
    if state["done"]:
        return None
    beat = plan["chapters"][state["chapter"]]["beats"][state["beat"]]
    after = beat.get("nudge_after") or plan.get("nudge_after") or DEFAULT_NUDGE_AFTER
    stalled = state["stalled"]
    if stalled < after or stalled % after:
        return None
    hints = beat["hints"]
    nth = stalled // after
    hint = hints[(nth - 1) % len(hints)] if hints else ""
    text = hint or f"Let the world offer a way toward this: {beat['title']}."
    source = f"hint {(nth - 1) % len(hints) + 1} of {len(hints)}" if hints else "no hints"
    return Nudge(
        text=text,
        reason=(
            f"{stalled} turns without progress on beat “{beat['title']}” "
            f"(nudged every {after}; {source})"
        ),
    )


def open_lines(plan: dict[str, Any], progress: Any) -> list[str]:
    """The authored fallback lines of the open beat, else of its chapter
    (``engine.story.fallback``); none once the story is told."""
    if not plan:
        return []
    state = repaired(plan, progress)
    if state["done"]:
        return []
    chapter = plan["chapters"][state["chapter"]]
    beat = chapter["beats"][state["beat"]]
    return list(beat.get("fallback") or chapter.get("fallback") or [])
