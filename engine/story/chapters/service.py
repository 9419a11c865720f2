"""``/chapters`` for the front end: where the adventure stands in its chapters, and the recap
archive (every version of every recap, as written)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.errors import InvalidInput
from engine.people.access.checks import check_may_read_chapters
from engine.people.access.rules import adventure_here
from engine.storage.chapter_models import ChapterRecap
from engine.storage.models import StoryNode
from engine.story.chapters.progress import PROGRESS_KEY, repaired
from engine.story.chapters.recaps import facts_lines
from engine.story.chapters.store import adventure_plan
from engine.story.chapters.words import chapter_words
from engine.story.line.read import ancestry

if TYPE_CHECKING:
    from engine.people.access.rules import Actor
    from engine.storage.database import Database

NO_CHAPTERS = "This adventure's scenario has no chapters."


@dataclass(frozen=True, slots=True)
class RecapView:
    number: int
    title: str
    version: int
    #: Of how many versions of this chapter's recap.
    versions: int
    text: str
    facts: list[str]
    epilogue: str
    #: Whether the turn and take that wrote it are still in the story as it stands.
    stands: bool = True


@dataclass(frozen=True, slots=True)
class ChaptersView:
    title: str
    #: One line per chapter: done, open (with its beat) or still ahead (title hidden).
    outline: list[str]
    recaps: list[RecapView] = field(default_factory=list)


class ChapterService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def overview(self, channel_id: int, actor: Actor) -> ChaptersView:
        async with self.db.session() as session:
            adventure = await adventure_here(session, channel_id)
            assert adventure.id is not None
            check_may_read_chapters(adventure, actor)
            plan = await adventure_plan(session, adventure.id)
            if not plan:
                raise InvalidInput(NO_CHAPTERS)
            rows = list(
                await session.scalars(
                    select(ChapterRecap)
                    .where(col(ChapterRecap.adventure_id) == adventure.id)
                    .order_by(col(ChapterRecap.chapter_index), col(ChapterRecap.version))
                )
            )
            standing = await _standing(session, adventure.head_node_id, rows)
        progress = repaired(plan, (adventure.world_state or {}).get(PROGRESS_KEY))
        return ChaptersView(
            adventure.title, _outline(plan, progress), _recaps(plan, rows, standing)
        )


async def _standing(
    session: AsyncSession, head_id: int | None, rows: list[ChapterRecap]
) -> set[int]:
    """The recaps (ids) whose turn is on the story's line with the take that wrote them live."""
    if not rows or head_id is None:
        return set()
    line = await ancestry(session, head_id)
    on_line = {row.node_id for row in rows if row.node_id in line}
    if not on_line:
        return set()
    found = await session.execute(
        select(col(StoryNode.id), col(StoryNode.live_take)).where(col(StoryNode.id).in_(on_line))
    )
    live = {node_id: take for node_id, take in found.all()}
    return {row.id for row in rows if row.id is not None and live.get(row.node_id) == row.take}


def _outline(plan: dict, progress: dict) -> list[str]:
    lines = []
    for i, chapter in enumerate(plan["chapters"]):
        number = f"{i + 1}."
        if progress["done"] or i < progress["chapter"]:
            lines.append(f"✅ {number} {chapter['title']}")
        elif i == progress["chapter"]:
            beats = chapter["beats"]
            beat = beats[progress["beat"]]
            lines.append(
                f"▶️ {number} {chapter['title']} · beat {progress['beat'] + 1} of {len(beats)}: "
                f"{beat['title']}"
            )
        else:
            lines.append(f"🔒 {number} (still ahead)")
    return lines


def _recaps(plan: dict, rows: list[ChapterRecap], standing: set[int]) -> list[RecapView]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.chapter_id] = counts.get(row.chapter_id, 0) + 1
    # Each recap's tally in its chapter's words, as the plan says them now.
    words = {chapter["id"]: chapter_words(chapter) for chapter in plan["chapters"]}
    return [
        RecapView(
            number=row.chapter_index + 1,
            title=row.title,
            version=row.version,
            versions=counts[row.chapter_id],
            text=row.text,
            facts=facts_lines(row.facts, words.get(row.chapter_id)),
            epilogue=row.epilogue,
            stands=row.id in standing,
        )
        for row in rows
    ]
