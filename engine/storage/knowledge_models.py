"""The knowledge library's tables: imported setting files (sources) and their chunks.

Kept apart from ``engine.storage.models`` (``engine.storage.tables`` puts these tables on
``SQLModel.metadata`` with the others); it maps ``Adventure.knowledge_present`` too (at the end).
The chunks are searched by words through full-text structures the models do not describe (an
SQLite FTS5 table kept by triggers; on PostgreSQL a generated ``search_vector`` column with a GIN
index; migration 0020), as memories are.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    case,
    cast,
    exists,
    inspect,
    literal_column,
)
from sqlalchemy.orm import column_property, declared_attr, deferred
from sqlmodel import Field, SQLModel

from engine.storage.models import Adventure

# The column helpers are engine.storage.models' own, written again here (that module once
# imported this one; engine.storage.tables now puts every table on the metadata).


def _fk(target: str, *, ondelete: str, nullable: bool = True, big: bool = False) -> Any:
    return Field(
        default=None,
        sa_column=Column(
            BigInteger if big else Integer,
            ForeignKey(target, ondelete=ondelete),
            nullable=nullable,
            index=True,
        ),
    )


def _text() -> Any:
    return Field(default="", sa_column=Column(Text, nullable=False))


def _defer(*names: str) -> Any:
    """``__mapper_args__`` that load the named heavy columns only when they are read."""

    def mapper_args(cls: Any) -> dict[str, Any]:
        return {"properties": {name: deferred(cls.__table__.c[name]) for name in names}}

    return declared_attr.directive(mapper_args)


class KnowledgeSource(SQLModel, table=True):
    """One imported ``.txt`` or ``.md`` file in a library: a server's, a player's own (their
    DM adventures'), or one adventure's. ``library`` names which ("server:12", "user:34",
    "adventure:56"); the row's foreign key to that server, player or adventure deletes it
    with them."""

    __tablename__: ClassVar[str] = "knowledge_sources"
    __mapper_args__ = _defer("text")
    __table_args__ = (
        # One copy of a file per library: importing it again is refused or replaces it.
        Index("ix_knowledge_sources_library_hash", "library", "content_hash", unique=True),
        Index("ix_knowledge_sources_library_title", "library", "title", unique=True),
    )

    id: int | None = Field(default=None, primary_key=True)
    library: str = Field(sa_column=Column(String(40), nullable=False))
    server_id: int | None = _fk("servers.id", ondelete="CASCADE", big=True)
    owner_id: int | None = _fk("users.id", ondelete="CASCADE", big=True)
    adventure_id: int | None = _fk("adventures.id", ondelete="CASCADE")
    title: str = Field(sa_column=Column(String(200), nullable=False))
    #: canon, reference or inspiration (``engine.library.knowledge.classes``).
    kind: str = Field(sa_column=Column(String(16), nullable=False))
    #: Canon only: every chunk goes into every turn's context (within the budget).
    always_include: bool = False
    #: Never shown to players by any command (the narrator still reads it).
    narrator_only: bool = False
    #: sha256 of the text as imported (after sanitising), hex.
    content_hash: str = Field(sa_column=Column(String(64), nullable=False))
    #: The whole file, so the chunks can be rebuilt and the source shown or exported.
    text: str = _text()
    chunk_count: int = 0
    token_count: int = 0
    imported_by: int | None = Field(
        default=None,
        sa_column=Column(BigInteger, ForeignKey("users.id", ondelete="SET NULL"), nullable=True),
    )
    created_at: datetime = Field(
        default_factory=lambda: datetime.now(UTC),
        sa_column=Column(DateTime(timezone=True), nullable=False),
    )


class KnowledgeChunk(SQLModel, table=True):
    """A passage of a source, cut at its headings (``engine.library.knowledge.chunking``)."""

    __tablename__: ClassVar[str] = "knowledge_chunks"
    __mapper_args__ = _defer("embedding")
    __table_args__ = (Index("ix_knowledge_chunks_library", "library"),)

    id: int | None = Field(default=None, primary_key=True)
    source_id: int = _fk("knowledge_sources.id", ondelete="CASCADE", nullable=False)
    #: The source's library, copied so a search is scoped by one column.
    library: str = Field(sa_column=Column(String(40), nullable=False))
    position: int = 0
    #: The headings above the passage, outermost first, joined with " › ".
    heading: str = Field(default="", sa_column=Column(Text, nullable=False))
    text: str = _text()
    token_count: int = 0
    #: The source's "always include", copied for the search's ``always_when``.
    always: bool = False
    #: The source's class's weight, copied so the search ranks as the retriever does.
    weight: float = 1.0
    embedding: bytes | None = Field(default=None, sa_column=Column(LargeBinary))
    embedding_model: str | None = None


# --- whether an adventure has any knowledge at all ---------------------------------------------


# ``Adventure.knowledge_present``: whether any of the libraries an adventure reads (its own,
# and its server's or, in DMs, its owner's: engine.library.knowledge.retrieval.libraries_of)
# holds a passage. An EXISTS over the chunks' library index, read with the adventure's row by
# every load of it, so that a turn, which loads its adventure anyway, knows without a
# statement of its own that an empty library (most adventures') has nothing to find. No state is
# kept in the process: each turn loads its adventure in a new session, so knowledge another
# process imported is seen by the next turn. Mapped here rather than on the class because it
# reads this module's table; the models module does not import this one.
def _library_of(prefix: str, id_column: Any) -> Any:
    # ``'server:' || CAST(id AS VARCHAR)``, as libraries_of spells the names (both dialects).
    return literal_column(f"'{prefix}:'", String) + cast(id_column, String)


_adventures = inspect(Adventure).local_table
_chunks = inspect(KnowledgeChunk).local_table
inspect(Adventure).add_property(
    "knowledge_present",
    column_property(
        exists()
        .where(
            _chunks.c.library.in_(
                [
                    _library_of("adventure", _adventures.c.id),
                    case(
                        (
                            _adventures.c.server_id.is_not(None),
                            _library_of("server", _adventures.c.server_id),
                        ),
                        else_=_library_of("user", _adventures.c.owner_id),
                    ),
                ]
            )
        )
        .correlate(_adventures)
    ),
)
