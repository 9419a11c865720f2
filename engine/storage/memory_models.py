"""The memory bank's tables: memories and the story summary's versions
(``engine.story.memory``)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import ClassVar

from sqlalchemy import (
    BigInteger,
    Column,
    LargeBinary,
    String,
)
from sqlmodel import Field, SQLModel

from engine.storage.models import _defer, _fk, _text, _when


class MemoryOrigin(StrEnum):
    STORY = "story"  # written by the memory bank from a stretch of the story
    PLAYER = "player"  # added by a player with /memory add; never cut back with the story


class Memory(SQLModel, table=True):
    """A fact the story established, retrieved into later contexts.

    Searched by words through a full-text index the models do not describe (an SQLite FTS5
    table kept by triggers; on PostgreSQL a generated ``search_vector`` column with a GIN
    index; migration 0006).
    """

    __tablename__: ClassVar[str] = "memories"
    __mapper_args__ = _defer("embedding")

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    text: str = _text()
    origin: MemoryOrigin = Field(
        default=MemoryOrigin.STORY,
        sa_column=Column(String(16), nullable=False, server_default=MemoryOrigin.STORY.value),
    )
    # Node indexes of the stretch of story this memory sums up.
    source_start: int = 0
    source_end: int = 0
    pinned: bool = False
    forgotten: bool = False
    use_count: int = 0
    last_used_at: datetime | None = _when(nullable=True)
    embedding: bytes | None = Field(default=None, sa_column=Column(LargeBinary))
    embedding_model: str | None = None
    embedding_dim: int | None = None
    #: A digest of ``embedding``'s bytes, written and cleared with it (migration 0028): a
    #: process that keeps vectors compares it to know its copy is current, without reading the
    #: vector (engine.llm.retrieval.vectors).
    embedding_digest: int | None = Field(default=None, sa_column=Column(BigInteger))
    created_at: datetime = _when()


class SummaryVersion(SQLModel, table=True):
    """A story summary as it stood after a rewrite or an edit, and how far it reached.

    The newest version is the adventure's ``story_summary``; the older ones let a cut-back
    story (undo, a branch switch) get back the summary that did not yet know the cut turns.
    """

    __tablename__: ClassVar[str] = "summary_versions"

    id: int | None = Field(default=None, primary_key=True)
    adventure_id: int = _fk("adventures.id", ondelete="CASCADE", nullable=False)
    text: str = _text()
    #: The story position (actions) the summary covers; see engine.story.line.positions.
    through: int = 0
    created_at: datetime = _when()
