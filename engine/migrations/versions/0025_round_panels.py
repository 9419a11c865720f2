"""Where each open round's panel is (adventures.round_panel_id), so that a restarted process
edits it and times the round out

Revision ID: 0025
Revises: 0024
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.add_column(sa.Column("round_panel_id", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.drop_column("round_panel_id")
