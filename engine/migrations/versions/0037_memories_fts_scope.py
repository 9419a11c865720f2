"""Memories' full-text index knows each memory's adventure (SQLite)

Migration 0006's FTS5 table indexed the text alone, so a term's lookup read every adventure's
memories that hold it and only then kept the one adventure's: a turn's search grew with the
whole table (4,000 memories: 12 ms; 40,000: 84 ms), not with the adventure's bank. The table is
built again indexing ``adventure_id`` too, and a search matches the adventure's number with each
term (``engine.storage.dialect.term_hits_query``), so FTS5 reads the term's entries only where
they meet the adventure's (40,000 memories: 10 ms). The triggers keep both columns in step; an
external-content table's 'delete' needs every indexed column's old value.

PostgreSQL is unchanged: its search filters one adventure's rows by their own ``tsvector``.

Revision ID: 0037
Revises: 0036
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0037"
down_revision: str | None = "0036"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TRIGGERS = ("insert", "delete", "update")

SCOPED = [
    "CREATE VIRTUAL TABLE memories_fts USING fts5(text, adventure_id, "
    "content='memories', content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER memories_fts_insert AFTER INSERT ON memories BEGIN "
    "INSERT INTO memories_fts(rowid, text, adventure_id) "
    "VALUES (new.id, new.text, new.adventure_id); END",
    "CREATE TRIGGER memories_fts_delete AFTER DELETE ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, text, adventure_id) "
    "VALUES ('delete', old.id, old.text, old.adventure_id); END",
    "CREATE TRIGGER memories_fts_update AFTER UPDATE OF text, adventure_id ON memories BEGIN "
    "INSERT INTO memories_fts(memories_fts, rowid, text, adventure_id) "
    "VALUES ('delete', old.id, old.text, old.adventure_id); "
    "INSERT INTO memories_fts(rowid, text, adventure_id) "
    "VALUES (new.id, new.text, new.adventure_id); END",
    "INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')",
]

# Migration 0006's, as it built them (copied, not imported: a migration describes the schema
# as it was at its revision, and 0006's module may change its own names).
TEXT_ONLY = [
    "CREATE VIRTUAL TABLE memories_fts USING fts5("
    "text, content='memories', content_rowid='id', tokenize='porter unicode61')",
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


def _rebuild(statements: list[str]) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for trigger in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS memories_fts_{trigger}")
    op.execute("DROP TABLE IF EXISTS memories_fts")
    for statement in statements:
        op.execute(statement)


def upgrade() -> None:
    _rebuild(SCOPED)


def downgrade() -> None:
    _rebuild(TEXT_ONLY)
