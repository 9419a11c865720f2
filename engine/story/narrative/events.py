"""Typed narrative events: the model proposes them, this validator disposes.

The model writes a ``"story"`` list in its held-back block, each item an event with absolute
values (where someone *is*, not where they moved by):

* ``add_entity {id?, name, kind?}``: someone or something the story now knows (adding a known
  id again renames it or changes its kind);
* ``set_location {entity, place}``: ``place`` an entity, or null for "nowhere known";
* ``set_possession {item, holder}``: ``holder`` an entity, or null for "nobody";
* ``add_fact {id?, text, about?}``, ``retract_fact {id}``: what is true;
* ``relate {a, b, relation}``: how ``a`` stands to ``b`` (an empty relation ends it);
* ``open_thread {id?, text}``, ``close_thread {id}``: the questions the story leaves open.

References (``entity``, ``place``, ``item``, ``holder``, ``about``, ``a``, ``b``) name an
entity by its id or its name, case aside; a fact or thread by its id or its text. An event is
applied whole or refused whole, with a reason: an unknown type, a missing or non-text field, a
reference that resolves to nothing (add the entity first, in the same list if need be: events
apply in order), or a change the narration is outranked on. The order of authority: the host's
correction outranks Canon, which outranks the narration. So the narration may not retract or
rewrite a fact the host set, nor one that Canon protects (``protected``: fact ids or texts, as
``engine.story.narrative.canon`` gives them); the host may change anything.

Nothing raises: a refused event is reported and the rest go on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from engine.story.narrative.state import (
    MAX_ENTITIES,
    MAX_FACTS,
    MAX_KIND_CHARS,
    MAX_NAME_CHARS,
    MAX_RELATIONSHIPS,
    MAX_TEXT_CHARS,
    MAX_THREADS,
    normalised,
    relation_key,
    slug,
)

#: Who proposed a change: the model's narration, or the host's correction.
BY_MODEL = "model"
BY_HOST = "host"

#: The most events one turn may propose; the rest are refused.
MAX_EVENTS_PER_TURN = 40

EVENT_TYPES = (
    "add_entity",
    "set_location",
    "set_possession",
    "add_fact",
    "retract_fact",
    "relate",
    "open_thread",
    "close_thread",
)


@dataclass(frozen=True, slots=True)
class Change:
    """One accepted change: which part and key, the value before and after (None: absent)."""

    kind: str
    key: str
    before: Any
    after: Any
    event: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Refusal:
    event: Any
    reason: str


@dataclass(frozen=True, slots=True)
class Outcome:
    state: dict[str, Any]
    changes: tuple[Change, ...] = ()
    refused: tuple[Refusal, ...] = ()


class _Refused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def apply_events(
    state: dict[str, Any] | None,
    events: Sequence[Any],
    *,
    by: str = BY_MODEL,
    protected: Collection[str] = frozenset(),
) -> Outcome:
    """``events`` applied to a copy of ``state`` in order; never raises."""
    applier = _Applier(normalised(state), by, frozenset(p.casefold() for p in protected))
    for at, event in enumerate(events):
        if at >= MAX_EVENTS_PER_TURN:
            applier.refused.append(
                Refusal(event, f"more than {MAX_EVENTS_PER_TURN} events in one turn")
            )
            continue
        applier.apply(event)
    return Outcome(applier.state, tuple(applier.changes), tuple(applier.refused))


class _Applier:
    def __init__(self, state: dict[str, Any], by: str, protected: frozenset[str]) -> None:
        self.state = state
        self.by = by
        self.protected = protected
        self.changes: list[Change] = []
        self.refused: list[Refusal] = []
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "add_entity": self._add_entity,
            "set_location": self._set_location,
            "set_possession": self._set_possession,
            "add_fact": self._add_fact,
            "retract_fact": self._retract_fact,
            "relate": self._relate,
            "open_thread": self._open_thread,
            "close_thread": self._close_thread,
        }

    def apply(self, event: Any) -> None:
        try:
            if not isinstance(event, dict):
                raise _Refused('an event is an object with a "type"')
            kind = event.get("type")
            handler = self._handlers.get(kind) if isinstance(kind, str) else None
            if handler is None:
                raise _Refused(f"unknown event type {kind!r}")
            handler(event)
        except _Refused as refused:
            self.refused.append(Refusal(event, refused.reason))

    # --- reading an event ---

    @staticmethod
    def _text(event: dict[str, Any], field: str, limit: int, *, required: bool = True) -> str:
        value = event.get(field)
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                raise _Refused(f"{field!r} is missing")
            return ""
        if not isinstance(value, str):
            raise _Refused(f"{field!r} must be text")
        return " ".join(value.split())[:limit]

    def _entity(self, event: dict[str, Any], field: str, *, nullable: bool = False) -> str | None:
        """The id of the entity ``event[field]`` names (None for null, where allowed)."""
        if field not in event:
            raise _Refused(f"{field!r} is missing")
        value = event[field]
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not value.strip():
            raise _Refused(f"{field!r} must name an entity")
        found = resolve_entity(self.state, value)
        if found is None:
            raise _Refused(f"{field} {value.strip()!r} is no known entity (add_entity it first)")
        return found

    def _record(self, kind: str, key: str, before: Any, after: Any, event: dict[str, Any]) -> None:
        if before != after:
            self.changes.append(Change(kind, key, before, after, event))

    def _outranked(self, fact_id: str, fact: dict[str, Any] | None) -> None:
        """Refuse the narration a change to a fact the host set or Canon protects."""
        if self.by == BY_HOST or fact is None:
            return
        if fact.get("by") == BY_HOST:
            raise _Refused(f"fact {fact_id!r} was set by the host; the narration may not change it")
        text = " ".join(str(fact.get("text", "")).casefold().split()).rstrip(".!?;: ")
        if fact_id.casefold() in self.protected or (
            text and any(text in " ".join(canon.split()) for canon in self.protected)
        ):
            raise _Refused(f"fact {fact_id!r} is Canon; the narration may not change it")

    # --- the events ---

    def _add_entity(self, event: dict[str, Any]) -> None:
        name = self._text(event, "name", MAX_NAME_CHARS, required="id" not in event)
        raw_id = self._text(event, "id", MAX_NAME_CHARS, required=False) or name
        entity_id = slug(raw_id)
        if not entity_id:
            raise _Refused("an entity needs an id or a name made of letters or digits")
        kind = self._text(event, "kind", MAX_KIND_CHARS, required=False)
        entities = self.state["entities"]
        before = entities.get(entity_id)
        if before is None and len(entities) >= MAX_ENTITIES:
            raise _Refused(f"the story already tracks {MAX_ENTITIES} entities")
        after = {
            "name": name or (before or {}).get("name") or raw_id,
            "kind": kind or (before or {}).get("kind") or "",
        }
        for other_id, other in entities.items():
            if other_id != entity_id and str(other.get("name", "")).casefold() == (
                after["name"].casefold()
            ):
                raise _Refused(f"{other_id!r} is already called {after['name']!r}")
        entities[entity_id] = after
        self._record("entity", entity_id, before, after, event)

    def _set_location(self, event: dict[str, Any]) -> None:
        entity = self._entity(event, "entity")
        place = self._entity(event, "place", nullable=True)
        assert entity is not None
        if place is not None and entity in self._places_around(place):
            raise _Refused(f"{place!r} is at {entity!r}: an entity cannot be inside itself")
        self._set("locations", "location", entity, place, event)

    def _places_around(self, place: str) -> list[str]:
        """``place`` and the places it is at, outward (a chain the state keeps free of loops)."""
        chain: list[str] = []
        at: str | None = place
        while at is not None and at not in chain:
            chain.append(at)
            at = self.state["locations"].get(at)
        return chain

    def _set_possession(self, event: dict[str, Any]) -> None:
        item = self._entity(event, "item")
        holder = self._entity(event, "holder", nullable=True)
        assert item is not None
        if holder == item:
            raise _Refused("an item cannot hold itself")
        self._set("possessions", "possession", item, holder, event)

    def _set(self, part: str, kind: str, key: str, value: str | None, event: dict) -> None:
        table = self.state[part]
        before = table.get(key)
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
        self._record(kind, key, before, value, event)

    def _add_fact(self, event: dict[str, Any]) -> None:
        text = self._text(event, "text", MAX_TEXT_CHARS)
        fact_id = slug(self._text(event, "id", MAX_NAME_CHARS, required=False) or text)
        if not fact_id:
            raise _Refused("a fact needs an id or a text made of letters or digits")
        about = self._entity(event, "about", nullable=True) if "about" in event else None
        facts = self.state["facts"]
        before = facts.get(fact_id)
        self._outranked(fact_id, before)
        if before is None and len(facts) >= MAX_FACTS:
            raise _Refused(f"the story already tracks {MAX_FACTS} facts")
        after = {"text": text, "about": about, "by": self.by}
        facts[fact_id] = after
        self._record("fact", fact_id, before, after, event)

    def _retract_fact(self, event: dict[str, Any]) -> None:
        fact_id = self._known(event, "id", "facts", "fact")
        before = self.state["facts"][fact_id]
        self._outranked(fact_id, before)
        del self.state["facts"][fact_id]
        self._record("fact", fact_id, before, None, event)

    def _relate(self, event: dict[str, Any]) -> None:
        a = self._entity(event, "a")
        b = self._entity(event, "b")
        assert a is not None and b is not None
        if a == b:
            raise _Refused("an entity's relation to itself is not tracked")
        relation = self._text(event, "relation", MAX_NAME_CHARS, required=False)
        table, key = self.state["relationships"], relation_key(a, b)
        before = table.get(key)
        if before is None and relation and len(table) >= MAX_RELATIONSHIPS:
            raise _Refused(f"the story already tracks {MAX_RELATIONSHIPS} relationships")
        after = {"a": a, "b": b, "relation": relation} if relation else None
        if after is None:
            table.pop(key, None)
        else:
            table[key] = after
        self._record("relationship", key, before, after, event)

    def _open_thread(self, event: dict[str, Any]) -> None:
        text = self._text(event, "text", MAX_TEXT_CHARS)
        thread_id = slug(self._text(event, "id", MAX_NAME_CHARS, required=False) or text)
        if not thread_id:
            raise _Refused("a thread needs an id or a text made of letters or digits")
        threads = self.state["threads"]
        before = threads.get(thread_id)
        if before is None and len(threads) >= MAX_THREADS:
            raise _Refused(f"the story already has {MAX_THREADS} open threads")
        after = {"text": text}
        threads[thread_id] = after
        self._record("thread", thread_id, before, after, event)

    def _close_thread(self, event: dict[str, Any]) -> None:
        thread_id = self._known(event, "id", "threads", "open thread")
        before = self.state["threads"].pop(thread_id)
        self._record("thread", thread_id, before, None, event)

    def _known(self, event: dict[str, Any], field: str, part: str, what: str) -> str:
        """The id of the fact or thread ``event[field]`` names, by id or by text."""
        value = event.get(field, event.get("text"))
        if not isinstance(value, str) or not value.strip():
            raise _Refused(f"{field!r} must name a {what}")
        found = resolve_keyed(self.state[part], value)
        if found is None:
            raise _Refused(f"there is no {what} {value.strip()!r}")
        return found


def resolve_entity(state: dict[str, Any], reference: str) -> str | None:
    """The id of the entity ``reference`` names: its id, its name (case aside) or the id its
    name would make; None when none, or more than one, does."""
    entities = state["entities"]
    wanted = reference.strip()
    if wanted in entities:
        return wanted
    folded = wanted.casefold()
    by_name = [i for i, e in entities.items() if str(e.get("name", "")).casefold() == folded]
    if len(by_name) == 1:
        return by_name[0]
    as_id = slug(wanted)
    return as_id if as_id in entities else None


def resolve_keyed(table: dict[str, Any], reference: str) -> str | None:
    """The key of the fact or thread ``reference`` names: its id, its text, or the id its text
    would make."""
    wanted = reference.strip()
    if wanted in table:
        return wanted
    folded = wanted.casefold()
    for key, value in table.items():
        if str(value.get("text", "")).casefold() == folded:
            return key
    as_id = slug(wanted)
    return as_id if as_id in table else None
