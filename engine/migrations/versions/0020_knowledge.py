"""Knowledge library: imported setting files, their chunks, and full-text search over them

SQLite gets an FTS5 table over the chunks' heading and text (porter stemming over unicode61
tokens), an external-content table kept in step by triggers, as migration 0006 built for
memories. PostgreSQL gets a stored generated column ``search_vector`` with a GIN index.

Revision ID: 0020
Revises: 0019
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQLITE_FTS = [
    "CREATE VIRTUAL TABLE knowledge_chunks_fts USING fts5(heading, text, "
    "content='knowledge_chunks', content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER knowledge_chunks_fts_insert AFTER INSERT ON knowledge_chunks BEGIN "
    "INSERT INTO knowledge_chunks_fts(rowid, heading, text) "
    "VALUES (new.id, new.heading, new.text); END",
    "CREATE TRIGGER knowledge_chunks_fts_delete AFTER DELETE ON knowledge_chunks BEGIN "
    "INSERT INTO knowledge_chunks_fts(knowledge_chunks_fts, rowid, heading, text) "
    "VALUES ('delete', old.id, old.heading, old.text); END",
    "CREATE TRIGGER knowledge_chunks_fts_update AFTER UPDATE OF heading, text "
    "ON knowledge_chunks BEGIN "
    "INSERT INTO knowledge_chunks_fts(knowledge_chunks_fts, rowid, heading, text) "
    "VALUES ('delete', old.id, old.heading, old.text); "
    "INSERT INTO knowledge_chunks_fts(rowid, heading, text) "
    "VALUES (new.id, new.heading, new.text); END",
]

POSTGRES_FTS = [
    "ALTER TABLE knowledge_chunks ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', heading || ' ' || text)) STORED",
    "CREATE INDEX ix_knowledge_chunks_search_vector ON knowledge_chunks USING gin (search_vector)",
]


def upgrade() -> None:
    op.create_table(
        "knowledge_sources",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("library", sa.String(length=40), nullable=False),
        sa.Column("server_id", sa.BigInteger(), nullable=True),
        sa.Column("owner_id", sa.BigInteger(), nullable=True),
        sa.Column("adventure_id", sa.Integer(), nullable=True),
        sa.Column("title", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("always_include", sa.Boolean(), nullable=False),
        sa.Column("narrator_only", sa.Boolean(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("imported_by", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["server_id"], ["servers.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["adventure_id"], ["adventures.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["imported_by"], ["users.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("knowledge_sources", schema=None) as batch_op:
        for column in ("server_id", "owner_id", "adventure_id"):
            batch_op.create_index(
                batch_op.f(f"ix_knowledge_sources_{column}"), [column], unique=False
            )
        batch_op.create_index(
            "ix_knowledge_sources_library_hash", ["library", "content_hash"], unique=True
        )
        batch_op.create_index(
            "ix_knowledge_sources_library_title", ["library", "title"], unique=True
        )
    op.create_table(
        "knowledge_chunks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("library", sa.String(length=40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("heading", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("always", sa.Boolean(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=True),
        sa.Column("embedding_model", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(["source_id"], ["knowledge_sources.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("knowledge_chunks", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_knowledge_chunks_source_id"), ["source_id"], unique=False
        )
        batch_op.create_index("ix_knowledge_chunks_library", ["library"], unique=False)
    dialect = op.get_bind().dialect.name
    for statement in SQLITE_FTS if dialect == "sqlite" else POSTGRES_FTS:
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for trigger in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS knowledge_chunks_fts_{trigger}")
        op.execute("DROP TABLE IF EXISTS knowledge_chunks_fts")
    op.drop_table("knowledge_chunks")
    op.drop_table("knowledge_sources")
