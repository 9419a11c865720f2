"""The story's typed narrative state: its shape, as a plain JSON object.

Generic on purpose (no genre baked in): entities of any kind, where each is, who holds what,
how two entities relate, what is true, and which questions the story has left open. It is a
plain JSON object so it rides in the adventure's snapshots (``engine.story.snapshots``) exactly as
the world state does, and undo, redo, retry and branch switches put it back with them.

::

    {
      "entities":      {"mira": {"name": "Mira", "kind": "person"}, ...},
      "locations":     {"mira": "harbor"},                  # entity -> the entity it is at
      "possessions":   {"lantern": "mira"},                 # item entity -> its holder
      "relationships": {"mira>tomas": {"a": "mira", "b": "tomas", "relation": "rivals"}},
      "facts":         {"gate_locked": {"text": "...", "about": "north_gate", "by": "model"}},
      "threads":       {"stolen_key": {"text": "Who stole the brass key?"}},
    }

Only open threads are kept; a closed one leaves the state, and the change log keeps what it
was. A fact's ``by`` says who established it: ``model`` (the narration) or ``host`` (a
correction), because the host's word outranks the narration's.
"""

from __future__ import annotations

import copy
import re
from typing import Any

#: The parts of the state, in the order they are shown.
PARTS = ("entities", "locations", "possessions", "relationships", "facts", "threads")

#: Caps, so a model that writes events forever cannot grow a row without bound.
MAX_ENTITIES = 500
MAX_FACTS = 500
MAX_RELATIONSHIPS = 500
MAX_THREADS = 100
MAX_NAME_CHARS = 80
MAX_KIND_CHARS = 40
MAX_TEXT_CHARS = 300
MAX_ID_CHARS = 40

_NOT_ID = re.compile(r"[^a-z0-9]+")


def empty() -> dict[str, Any]:
    return {part: {} for part in PARTS}


def normalised(raw: Any) -> dict[str, Any]:
    """A deep copy of ``raw`` in the state's shape (missing parts empty, entries of the wrong
    shape dropped: a snapshot inside an imported file may hold anything), so applying events
    never changes the caller's object."""
    state = empty()
    if not isinstance(raw, dict):
        return state
    for part in PARTS:
        value = raw.get(part)
        if isinstance(value, dict):
            state[part] = {
                key: copy.deepcopy(entry)
                for key, entry in value.items()
                if isinstance(key, str) and _SHAPES[part](entry)
            }
    return state


def _texts(entry: Any, *fields: str) -> bool:
    return isinstance(entry, dict) and all(isinstance(entry.get(f), str) for f in fields)


_SHAPES = {
    "entities": lambda e: _texts(e, "name"),
    "locations": lambda e: isinstance(e, str),
    "possessions": lambda e: isinstance(e, str),
    "relationships": lambda e: _texts(e, "a", "b", "relation"),
    "facts": lambda e: _texts(e, "text"),
    "threads": lambda e: _texts(e, "text"),
}


def is_empty(state: dict[str, Any] | None) -> bool:
    return not state or not any(state.get(part) for part in PARTS)


def stored(state: dict[str, Any]) -> dict[str, Any]:
    """The state as a snapshot keeps it: the parts that hold something ({} when none do), so
    an empty state and an absent one compare equal."""
    return {part: state[part] for part in PARTS if state.get(part)}


def slug(text: str) -> str:
    """An id made from a name or a text: lower case, words joined by ``_``."""
    return _NOT_ID.sub("_", text.casefold()).strip("_")[:MAX_ID_CHARS].strip("_")


def relation_key(a: str, b: str) -> str:
    return f"{a}>{b}"


def name_of(state: dict[str, Any], entity_id: str | None) -> str:
    """An entity's name for people to read (its id when it has none)."""
    if entity_id is None:
        return "nobody"
    entity = state["entities"].get(entity_id)
    return str(entity.get("name") or entity_id) if isinstance(entity, dict) else entity_id
