"""An adventure's sampling: top-p, min-p, the repetition, presence and frequency penalties, its
stop strings, and how deep in the story its author's note goes

Revision ID: 0029
Revises: 0028
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EMPTY = sa.text("'[]'")
SAMPLING = ("top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty")


def upgrade() -> None:
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        for name in SAMPLING:
            batch_op.add_column(sa.Column(name, sa.Float(), nullable=True))
        batch_op.add_column(
            sa.Column("stop_strings", sa.JSON(), nullable=False, server_default=EMPTY)
        )
        batch_op.add_column(sa.Column("authors_note_depth", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.drop_column("authors_note_depth")
        batch_op.drop_column("stop_strings")
        for name in reversed(SAMPLING):
            batch_op.drop_column(name)
