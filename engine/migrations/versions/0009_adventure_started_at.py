"""When each adventure began here, for the caps on adventures per player

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.add_column(sa.Column("started_at", sa.DateTime(timezone=True), nullable=True))
    # Adventures from before this revision began when they were created (an imported one
    # counts from its story's date: long past, so it weighs on no cap).
    op.execute("UPDATE adventures SET started_at = created_at")
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.alter_column(
            "started_at", existing_type=sa.DateTime(timezone=True), nullable=False
        )
        batch_op.create_index("ix_adventures_host_started", ["host_id", "started_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.drop_index("ix_adventures_host_started")
        batch_op.drop_column("started_at")
