"""Context reports: what went into each narrator turn's context, and why (for Insights)

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("story_nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("context_report", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("story_nodes", schema=None) as batch_op:
        batch_op.drop_column("context_report")
