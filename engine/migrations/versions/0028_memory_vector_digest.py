"""Memories' vector digest: what a process that keeps vectors compares to know its copy is current

Revision ID: 0028
Revises: 0027

``memories.embedding_digest``: a 64-bit digest of the stored vector's bytes
(``engine.llm.retrieval.semantic.vector_digest``), written with the vector and cleared with it.
A turn reads the ids and digests of an adventure's vectors, never the vectors it already holds
(engine.llm.retrieval.vectors). The vectors stored before are digested here, in batches.
"""

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 500


def _digest(data: bytes) -> int:
    # The same as engine.llm.retrieval.semantic.vector_digest, written again: a migration does
    # not change when the code it once matched does.
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)


def upgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.add_column(sa.Column("embedding_digest", sa.BigInteger(), nullable=True))
    bind = op.get_bind()
    last = 0
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT id, embedding FROM memories WHERE id > :last AND embedding IS NOT NULL "
                "ORDER BY id LIMIT :batch"
            ),
            {"last": last, "batch": BATCH},
        ).all()
        if not rows:
            break
        bind.execute(
            sa.text("UPDATE memories SET embedding_digest = :digest WHERE id = :id"),
            [{"id": row.id, "digest": _digest(bytes(row.embedding))} for row in rows],
        )
        last = rows[-1].id


def downgrade() -> None:
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_column("embedding_digest")
