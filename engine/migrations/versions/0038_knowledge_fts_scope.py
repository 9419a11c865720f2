"""The knowledge library's full-text index knows each passage's library (SQLite)

As migration 0037 did for memories: migration 0020's FTS5 table indexed a passage's heading and
text alone, so a term's lookup read every library's passages that hold it, every server's, and
only then kept the turn's libraries. The table is built again indexing ``library`` too, and a
search matches the turn's libraries with each term, the term in the heading and text only
(``engine.storage.dialect.term_hits_query``: a library's name has words of its own, "server"
and "adventure"). The triggers keep the three columns in step.

PostgreSQL is unchanged: its search filters the libraries' rows by their own ``tsvector``.

Revision ID: 0038
Revises: 0037
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0038"
down_revision: str | None = "0037"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TRIGGERS = ("insert", "delete", "update")

SCOPED = [
    "CREATE VIRTUAL TABLE knowledge_chunks_fts USING fts5(heading, text, library, "
    "content='knowledge_chunks', content_rowid='id', tokenize='porter unicode61')",
    "CREATE TRIGGER knowledge_chunks_fts_insert AFTER INSERT ON knowledge_chunks BEGIN "
    "INSERT INTO knowledge_chunks_fts(rowid, heading, text, library) "
    "VALUES (new.id, new.heading, new.text, new.library); END",
    "CREATE TRIGGER knowledge_chunks_fts_delete AFTER DELETE ON knowledge_chunks BEGIN "
    "INSERT INTO knowledge_chunks_fts(knowledge_chunks_fts, rowid, heading, text, library) "
    "VALUES ('delete', old.id, old.heading, old.text, old.library); END",
    "CREATE TRIGGER knowledge_chunks_fts_update AFTER UPDATE OF heading, text, library "
    "ON knowledge_chunks BEGIN "
    "INSERT INTO knowledge_chunks_fts(knowledge_chunks_fts, rowid, heading, text, library) "
    "VALUES ('delete', old.id, old.heading, old.text, old.library); "
    "INSERT INTO knowledge_chunks_fts(rowid, heading, text, library) "
    "VALUES (new.id, new.heading, new.text, new.library); END",
    "INSERT INTO knowledge_chunks_fts(knowledge_chunks_fts) VALUES ('rebuild')",
]

# Migration 0020's, as it built them (copied, not imported: a migration describes the schema
# as it was at its revision).
HEADING_AND_TEXT = [
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
    "INSERT INTO knowledge_chunks_fts(knowledge_chunks_fts) VALUES ('rebuild')",
]


def _rebuild(statements: list[str]) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for trigger in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS knowledge_chunks_fts_{trigger}")
    op.execute("DROP TABLE IF EXISTS knowledge_chunks_fts")
    for statement in statements:
        op.execute(statement)


def upgrade() -> None:
    _rebuild(SCOPED)


def downgrade() -> None:
    _rebuild(HEADING_AND_TEXT)
