"""The story as it stands, read for a prose export (`/adventure export` as text, Markdown, HTML).

A prose export is for reading and sharing, not for restoring: it holds the adventure's current
line only, from the opening to the head, each turn in its live take (a node's ``text`` is its
live take's). Undone turns, other branches and the other takes of a turn are not on that line,
so they are left out by reading nothing else. What is read is a list of passages in story order:
the player actions as they were stored ("> Ann opens the door."), the narration, and a chapter
heading where each chapter began. ``engine.library.formats.prose_render`` writes them out.

Where a chapter began is read from the chapter progress each narrator turn left in its state
(``engine.story.chapters.progress``: ``from_index`` is the story index the open chapter began
after), not from the recaps: an imported adventure has no recaps, and a recap may belong to a
take that is no longer live, while the states on the line are exactly this line's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.storage.models import Adventure, Role, StoryNode
from engine.story.chapters.progress import PROGRESS_KEY, repaired
from engine.story.chapters.store import adventure_plan
from engine.story.line.read import line_length, line_tail

#: Ids asked for in one ``IN`` list: well under SQLite's and PostgreSQL's limits on parameters.
_ID_CHUNK = 500
#: The key of the headings that come before the opening (the first chapter's).
_BEFORE_OPENING = -1


class PassageKind(StrEnum):
    CHAPTER = "chapter"
    ACTION = "action"
    NARRATION = "narration"


@dataclass(frozen=True, slots=True)
class Passage:
    kind: PassageKind
    #: As stored (a chapter's: "Chapter 2: The Drowned Chapel"); never escaped here, each
    #: renderer escapes for its own format.
    text: str


@dataclass(frozen=True, slots=True)
class StoryProse:
    title: str
    passages: tuple[Passage, ...]


async def read_story_prose(session: AsyncSession, adventure: Adventure) -> StoryProse:
    """The adventure's current line as passages, oldest first."""
    assert adventure.id is not None
    if adventure.head_node_id is None:
        return StoryProse(adventure.title, ())
    head = await session.get(StoryNode, adventure.head_node_id)
    if head is None or head.id is None:
        return StoryProse(adventure.title, ())
    # The whole line in one recursive query, light columns only (the heavy ones are deferred).
    nodes = await line_tail(session, head.id, line_length(head))
    headings = await _chapter_headings(session, adventure, nodes)
    passages: list[Passage] = [
        Passage(PassageKind.CHAPTER, title) for title in headings.pop(_BEFORE_OPENING, [])
    ]
    last = nodes[-1].index if nodes else 0
    for node in nodes:
        text = node.text.strip()
        if text:
            kind = PassageKind.ACTION if node.role == Role.PLAYER else PassageKind.NARRATION
            passages.append(Passage(kind, text))
        # A chapter opened by the head's own turn has no story under it yet: its heading would
        # stand over nothing, so it waits for the turn that begins the chapter.
        if node.index < last:
            passages += [Passage(PassageKind.CHAPTER, t) for t in headings.get(node.index, [])]
    return StoryProse(adventure.title, tuple(passages))


async def _chapter_headings(
    session: AsyncSession, adventure: Adventure, nodes: list[StoryNode]
) -> dict[int, list[str]]:
    """Chapter headings by the story index they follow (``_BEFORE_OPENING`` for the first
    chapter's); none for an adventure without chapters, which costs one small query."""
    assert adventure.id is not None
    plan = await adventure_plan(session, adventure.id)
    chapters = plan.get("chapters") if plan else None
    if not chapters:
        return {}
    began_after: dict[int, int] = {}
    for state in [*await _line_states(session, nodes), adventure.world_state]:
        progress = (state or {}).get(PROGRESS_KEY) if isinstance(state, dict) else None
        if not isinstance(progress, dict):
            continue
        # Repaired: a state brought in by an import may hold anything.
        progress = repaired(plan, progress)
        began_after.setdefault(progress["chapter"], progress["from_index"])
    began_after[0] = _BEFORE_OPENING  # the first chapter begins with the story
    on_line = {node.index for node in nodes}
    headings: dict[int, list[str]] = {}
    for number, after in sorted(began_after.items()):
        if after == _BEFORE_OPENING or after in on_line:
            title = chapters[number]["title"]
            headings.setdefault(after, []).append(f"Chapter {number + 1}: {title}")
    return headings


async def _line_states(session: AsyncSession, nodes: list[StoryNode]) -> list[Any]:
    """The state each narrator turn of the line left (``state_after``, a heavy column read only
    here, for the line's own turns), in story order."""
    ids = [node.id for node in nodes if node.role == Role.NARRATOR and node.id is not None]
    found: dict[int | None, Any] = {}
    for start in range(0, len(ids), _ID_CHUNK):
        rows = await session.execute(
            select(col(StoryNode.id), col(StoryNode.state_after)).where(
                col(StoryNode.id).in_(ids[start : start + _ID_CHUNK]),
                col(StoryNode.state_after).is_not(None),
            )
        )
        found |= dict(rows.tuples().all())
    return [found[node_id] for node_id in ids if node_id in found]
