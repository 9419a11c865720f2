"""The channel a thread was opened from for an adventure, to find it from there

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Adventures from before this revision stay without one: where their thread came from was
    # not kept, and they are found in their thread as before.
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parent_channel_id", sa.BigInteger(), nullable=True))
        batch_op.create_index(
            "ix_adventures_parent_channel", ["parent_channel_id", "ended_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.drop_index("ix_adventures_parent_channel")
        batch_op.drop_column("parent_channel_id")
