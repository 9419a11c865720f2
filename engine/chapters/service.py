"""``/chapters`` for the front end: where the adventure stands in its chapters, and the recap
archive (every version of every recap, as written)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlmodel import col

from engine.access import adventure_here, check_may_read_chapters
from engine.chapters.progress import PROGRESS_KEY, repaired
from engine.chapters.recaps import facts_lines
from engine.chapters.store import adventure_plan
from engine.errors import InvalidInput
from engine.storage.chapter_models import ChapterRecap

if TYPE_CHECKING:
    from engine.access import Actor
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
        progress = repaired(plan, (adventure.world_state or {}).get(PROGRESS_KEY))
        return ChaptersView(adventure.title, _outline(plan, progress), _recaps(rows))


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


def _recaps(rows: list[ChapterRecap]) -> list[RecapView]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.chapter_id] = counts.get(row.chapter_id, 0) + 1
    return [
        RecapView(
            number=row.chapter_index + 1,
            title=row.title,
            version=row.version,
            versions=counts[row.chapter_id],
            text=row.text,
            facts=facts_lines(row.facts),
            epilogue=row.epilogue,
        )
        for row in rows
    ]
