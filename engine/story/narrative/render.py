"""The narrative state in words: the prompt's rule and section, and what people read.

The prompt's section shows only what the scene needs: the entities named in the recent text
(by name or id), with where they are, what they hold and who holds them, how they relate to
each other, the facts about them, and the open threads; within its token budget, scene first,
threads after. Everything else stays out (the whole state would grow with the story).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.prompt.held_block import BlockPart
from engine.prompt.tokens import count_tokens
from engine.story.narrative.state import name_of

#: What the held-back block carries for the narrative state (``engine.prompt.held_block``),
#: when the adventure tracks it.
STORY_PART = BlockPart(
    key="story",
    title="Story-state events",
    rule=(
        '"story": a list of events when the story changes who exists, where someone or '
        "something is, who holds what, what is true, how two characters relate, or which "
        "questions are open. Values are absolute. Events: add_entity {id, name, kind}; "
        "set_location {entity, place}; set_possession {item, holder}; add_fact {id, text, "
        "about}; retract_fact {id}; relate {a, b, relation}; open_thread {id, text}; "
        "close_thread {id}. Name entities by id; add one before naming it. Never contradict "
        "the story state."
    ),
    example={
        "story": [
            {"type": "add_entity", "id": "mira", "name": "Mira", "kind": "person"},
            {"type": "add_fact", "id": "mira_hurt", "text": "Mira is wounded.", "about": "mira"},
        ]
    },
)

STATE_HEADING = "Story state:"
THREADS_HEADING = "Open threads:"

_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class StorySection:
    text: str
    #: Why it holds what it holds, for Insights.
    reason: str


def scene_entities(state: dict[str, Any], recent_text: str) -> list[str]:
    """The ids of the entities the recent text names (by name or id, as whole words, case and
    punctuation aside), in the state's order. The text is split into words once; a name is
    looked for only when all its words are there (a state may know hundreds of entities)."""
    words = _words(recent_text)
    present = set(words)
    joined = f" {' '.join(words)} "
    found = []
    for entity_id, entity in state["entities"].items():
        for name in (entity_id.replace("_", " "), str(entity.get("name", ""))):
            name_words = _words(name)
            if (
                name_words
                and present.issuperset(name_words)
                and f" {' '.join(name_words)} " in joined
            ):
                found.append(entity_id)
                break
    return found


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def entity_line(state: dict[str, Any], entity_id: str) -> str:
    """ "Mira (person): at The Harbor; holds the lantern; held by …"."""
    entity = state["entities"].get(entity_id) or {}
    kind = entity.get("kind")
    head = name_of(state, entity_id) + (f" ({kind})" if kind else "")
    parts = []
    place = state["locations"].get(entity_id)
    if place:
        parts.append(f"at {name_of(state, place)}")
    held = [name_of(state, item) for item, who in state["possessions"].items() if who == entity_id]
    if held:
        parts.append("holds " + ", ".join(held))
    holder = state["possessions"].get(entity_id)
    if holder:
        parts.append(f"held by {name_of(state, holder)}")
    return head + (": " + "; ".join(parts) if parts else "")


def relation_line(state: dict[str, Any], relation: dict[str, Any]) -> str:
    a, b = name_of(state, relation.get("a")), name_of(state, relation.get("b"))
    return f"{a} → {b}: {relation.get('relation', '')}"


def fact_line(state: dict[str, Any], fact: dict[str, Any]) -> str:
    about = fact.get("about")
    return str(fact.get("text", "")) + (f" [{name_of(state, about)}]" if about else "")


def prompt_section(state: dict[str, Any], recent_text: str, budget: int) -> StorySection:
    """The scene's part of the state, within ``budget`` tokens."""
    scene = scene_entities(state, recent_text)
    in_scene = set(scene)
    lines: list[str] = [entity_line(state, entity_id) for entity_id in scene]
    lines += [
        relation_line(state, relation)
        for relation in state["relationships"].values()
        if relation.get("a") in in_scene and relation.get("b") in in_scene
    ]
    # A fact about nothing in particular comes in when it names someone in the scene: only
    # the scene's names are looked for (a few), not every entity's.
    scene_only = {"entities": {i: state["entities"][i] for i in scene}}
    lines += [
        fact_line(state, fact)
        for fact in state["facts"].values()
        if fact.get("about") in in_scene
        or (fact.get("about") is None and scene_entities(scene_only, str(fact.get("text", ""))))
    ]
    threads = [f"{thread_id}: {t.get('text', '')}" for thread_id, t in state["threads"].items()]
    return _fit(lines, threads, budget, len(scene), len(state["entities"]))


def _fit(
    lines: Sequence[str], threads: Sequence[str], budget: int, scene: int, known: int
) -> StorySection:
    kept: list[str] = []
    kept_threads: list[str] = []
    used = count_tokens(STATE_HEADING) + count_tokens(THREADS_HEADING)
    left_out = 0
    for line, into in [*((x, kept) for x in lines), *((x, kept_threads) for x in threads)]:
        cost = count_tokens(f"- {line}")
        if used + cost > budget:
            left_out += 1
            continue
        into.append(f"- {line}")
        used += cost
    if not kept and not kept_threads:
        reason = f"no entity of {known} named in the scene, no open thread"
        if left_out:
            reason = f"nothing fits its budget of {budget} tokens"
        return StorySection("", reason)
    parts = []
    if kept:
        parts.append("\n".join([STATE_HEADING, *kept]))
    if kept_threads:
        parts.append("\n".join([THREADS_HEADING, *kept_threads]))
    reason = f"{scene} of {known} entities named in the scene, {len(kept_threads)} open threads"
    if left_out:
        reason += f"; {left_out} lines over its budget of {budget} tokens left out"
    return StorySection("\n".join(parts), reason)


def describe(state: dict[str, Any]) -> str:
    """The whole state for ``/narrative state``: who is where, who holds what, relations, facts,
    open threads."""
    parts = []
    entities = [f"- {entity_line(state, entity_id)}" for entity_id in state["entities"]]
    if entities:
        parts.append("**Who and what**\n" + "\n".join(entities))
    relations = [f"- {relation_line(state, r)}" for r in state["relationships"].values()]
    if relations:
        parts.append("**Relationships**\n" + "\n".join(relations))
    facts = [
        f"- {fact_line(state, fact)}" + (" (set by the host)" if fact.get("by") == "host" else "")
        for fact in state["facts"].values()
    ]
    if facts:
        parts.append("**Facts**\n" + "\n".join(facts))
    threads = [f"- `{key}` {t.get('text', '')}" for key, t in state["threads"].items()]
    if threads:
        parts.append("**Open threads**\n" + "\n".join(threads))
    return "\n\n".join(parts) or "Nothing is tracked yet."


def change_line(
    kind: str, key: str, before: Any, after: Any, state: dict[str, Any] | None = None
) -> str:
    """One change as a line: "location Mira: The Inn → The Harbor", entities by their names
    in ``state`` where it knows them (by id otherwise)."""
    if state is not None and kind in ("entity", "location", "possession"):
        key = name_of(state, key)
        if kind != "entity":
            before = None if before is None else name_of(state, before)
            after = None if after is None else name_of(state, after)
    return f"{kind} {key}: {_value(before)} → {_value(after)}"


def _value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, dict):
        for field in ("text", "relation", "name"):
            if field in value:
                return str(value[field])
    return str(value)
