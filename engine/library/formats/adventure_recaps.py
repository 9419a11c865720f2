"""The chapter recaps in an adventure file (``engine.library.formats.adventure``): written out
with the adventure, read back and checked, and stored again with the restored story.

A recap is written once, by the model, when a turn ends a chapter, and never again: left
behind, a restored adventure's /chapters would show the chapters done with none of their
recaps, and no turn would write them again. Each names the turn that ended its chapter by
its place in the file, as save points do, so the file names no database id.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.library.reading.errors import ImportRejected
from engine.library.reading.fields import Fields
from engine.platform.sanitise import sanitise, sanitise_json
from engine.storage.chapter_models import ChapterRecap

#: The key of the recaps in an adventure file.
KEY = "chapter_recaps"
#: More than any plan plays out (a plan's chapters, each retried a few times).
MAX_RECAPS = 1_000
#: A recap is a few sentences; its epilogue is the plan's, whose text is capped as well.
TEXT_MAX = 20_000


def _iso(row: ChapterRecap) -> str | None:
    return row.created_at.isoformat() if row.created_at is not None else None


async def export_recaps(
    session: AsyncSession, adventure_id: int, number: dict[int | None, int]
) -> list[dict[str, Any]]:
    """The adventure's recaps, oldest chapter first; ``number``: each node's place in the file."""
    rows = await session.scalars(
        select(ChapterRecap)
        .where(col(ChapterRecap.adventure_id) == adventure_id)
        .order_by(col(ChapterRecap.chapter_index), col(ChapterRecap.version), col(ChapterRecap.id))
    )
    return [
        {
            "chapter_id": r.chapter_id,
            "chapter_index": r.chapter_index,
            "title": r.title,
            "version": r.version,
            "node": number.get(r.node_id),
            "take": r.take,
            "facts": r.facts,
            "text": r.text,
            "epilogue": r.epilogue,
            "model": r.model,
            "created_at": _iso(r),
        }
        for r in rows
    ]


def parse_recaps(f: Fields, node_count: int) -> list[dict[str, Any]]:
    """The file's recaps, checked as the table would take them; ``ImportRejected`` names the
    first that would not fit."""
    items = f.items(KEY)
    if len(items) > MAX_RECAPS:
        raise ImportRejected(f"{KEY}: {len(items):,} entries; at most {MAX_RECAPS:,}.")
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, int]] = set()
    for path, item in items:
        r = Fields(item, path)
        chapter = sanitise(r.text("chapter_id")).strip()
        if not chapter or len(chapter) > 40:
            raise ImportRejected(f"{r.at('chapter_id')}: a chapter id of 1 to 40 characters.")
        version = r.integer("version", default=1, low=1) or 1
        if (chapter, version) in seen:
            # The table holds one recap per chapter and version.
            raise ImportRejected(f"{path}: chapter “{chapter}” has recap {version} twice.")
        seen.add((chapter, version))
        texts = {key: sanitise(r.text(key)) for key in ("text", "epilogue")}
        for key, value in texts.items():
            if len(value) > TEXT_MAX:
                raise ImportRejected(
                    f"{r.at(key)}: {len(value):,} characters; at most {TEXT_MAX:,}."
                )
        row: dict[str, Any] = {
            "chapter_id": chapter,
            "chapter_index": r.integer("chapter_index", low=0) or 0,
            "title": sanitise(r.text("title")).strip()[:100],
            "version": version,
            "node": r.integer("node", default=None, low=0, high=max(node_count - 1, 0)),
            "take": r.integer("take", default=1, low=1) or 1,
            "facts": sanitise_json(r.mapping("facts")),
            **texts,
            "model": sanitise(r.text("model"))[:200],
        }
        created = r.when("created_at")
        if created is not None:
            row["created_at"] = created
        out.append(row)
    return out


def write_recaps(
    session: AsyncSession, adventure_id: int, recaps: list[dict[str, Any]], ids: list[int]
) -> None:
    """Add the parsed recaps to the restored adventure; ``ids``: the new node ids, in the
    file's order. The caller flushes and commits."""
    for row in recaps:
        fields = dict(row)
        node = fields.pop("node")
        session.add(
            ChapterRecap(
                adventure_id=adventure_id,
                node_id=ids[node] if node is not None else None,
                **fields,
            )
        )
