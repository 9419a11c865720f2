"""An adventure's own knowledge sources in its adventure file
(``engine.library.formats.adventure``).

The sources attached to the adventure travel with it, as their text, class and options; the
passages are cut again and indexed where the file is imported, in the import's transaction, so
a file never carries chunks or vectors (vectors are of one embedding model, as memories' are).
Narrator-only sources stay behind: a file is something players read. A server's or a player's
library is not the adventure's and stays too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from engine.library.knowledge.chunking import Chunk, chunk_text, is_markdown
from engine.library.knowledge.classes import KnowledgeClass, class_named
from engine.library.knowledge.library import MAX_SOURCES, TITLE_MAX, add_source, content_hash
from engine.library.knowledge.retrieval import adventure_library
from engine.library.reading.errors import ImportRejected
from engine.library.reading.fields import Fields
from engine.platform.sanitise import sanitise
from engine.storage.knowledge_models import KnowledgeSource

#: The adventure file's key for them.
KEY = "knowledge"


@dataclass(frozen=True, slots=True)
class CarriedSource:
    title: str
    kind: KnowledgeClass
    always_include: bool
    text: str
    chunks: tuple[Chunk, ...]


async def export_sources(session: AsyncSession, adventure_id: int) -> list[dict[str, Any]]:
    """The adventure's own sources as the file holds them, by title; narrator-only ones left
    out."""
    rows = await session.execute(
        select(
            col(KnowledgeSource.title),
            col(KnowledgeSource.kind),
            col(KnowledgeSource.always_include),
            col(KnowledgeSource.text),
        )
        .where(
            col(KnowledgeSource.library) == adventure_library(adventure_id),
            col(KnowledgeSource.narrator_only).is_(False),
        )
        .order_by(col(KnowledgeSource.title))
    )
    return [
        {"title": r.title, "class": r.kind, "always_include": r.always_include, "text": r.text}
        for r in rows
    ]


def parse_sources(f: Fields) -> list[CarriedSource]:
    """The file's sources, checked and cut into passages (nothing is written); raises
    ``ImportRejected`` naming the first problem."""
    out: list[CarriedSource] = []
    seen: set[str] = set()
    for path, item in f.items(KEY):
        s = Fields(item, path)
        title = " ".join(sanitise(s.text("title")).split())[:TITLE_MAX]
        kind = class_named(s.text("class"))
        text = sanitise(s.text("text")).strip()
        if not title or kind is None or not text:
            raise ImportRejected(
                f"{path}: a knowledge source needs a title, a class (canon, reference or "
                "inspiration) and its text."
            )
        digest = content_hash(text)
        if title in seen or digest in seen:
            raise ImportRejected(f"{path}: “{title[:60]}” is in the file twice.")
        seen |= {title, digest}
        always = s.flag("always_include")
        if always and kind is not KnowledgeClass.CANON:
            raise ImportRejected(f"{path}: only Canon can be always included.")
        chunks = tuple(chunk_text(text, markdown=is_markdown(title)))
        out.append(CarriedSource(title, kind, always, text, chunks))
    if len(out) > MAX_SOURCES:
        raise ImportRejected(f"{KEY}: at most {MAX_SOURCES} sources, the file has {len(out)}.")
    return out


async def write_sources(
    session: AsyncSession, adventure_id: int, sources: list[CarriedSource]
) -> None:
    """The sources onto the imported adventure, in the import's transaction."""
    for source in sources:
        await add_source(
            session,
            adventure_library(adventure_id),
            title=source.title,
            kind=source.kind,
            text=source.text,
            content_hash=content_hash(source.text),
            chunks=source.chunks,
            adventure_id=adventure_id,
            always_include=source.always_include,
        )
