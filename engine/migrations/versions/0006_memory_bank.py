"""Memory bank: full-text search over memories, their origin, and summary versions

SQLite gets an FTS5 table over ``memories.text`` (porter stemming over unicode61 tokens), an
external-content table kept in step by triggers, so the text is stored once. PostgreSQL gets a
stored generated column ``search_vector`` (``to_tsvector('english', text)``, so a query never
recomputes it) with a GIN index.

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SQLITE_FTS = [
    "CREATE VIRTUAL TABLE memories_fts USING fts5("
    "text, content='memories', content_rowid='id', tokenize='porter unicode61')",
    # External content: the triggers tell the index what changed (the 'delete' command needs
    # the old text, which is why the update trigger deletes then inserts).
    "CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN "
    "INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text); END",
    "CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "END",
    "CREATE TRIGGER memories_fts_update AFTER UPDATE OF text ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text); "
    "INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text); END",
    "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')",
]

POSTGRES_FTS = [
    "ALTER TABLE memories ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
    "CREATE INDEX ix_memories_search_vector ON memories USING gin (search_vector)",
]


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("origin", sa.String(length=16), nullable=False, server_default="story")
        )
    op.create_table(
        "summary_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("adventure_id", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("through", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["adventure_id"], ["adventures.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("summary_versions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_summary_versions_adventure_id"), ["adventure_id"], unique=False
        )
    dialect = op.get_bind().dialect.name
    for statement in SQLITE_FTS if dialect == "sqlite" else POSTGRES_FTS:
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for trigger in ("insert", "delete", "update"):
            op.execute(f"DROP TRIGGER IF EXISTS memories_fts_{trigger}")
        op.execute("DROP TABLE IF EXISTS memories_fts")
    else:
        op.execute("DROP INDEX IF EXISTS ix_memories_search_vector")
        op.execute("ALTER TABLE memories DROP COLUMN IF EXISTS search_vector")
    with op.batch_alter_table("summary_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_summary_versions_adventure_id"))
    op.drop_table("summary_versions")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_column("origin")
