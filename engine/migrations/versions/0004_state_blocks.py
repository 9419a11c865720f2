"""State blocks: the block each narrator turn emitted, kept light for history

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("story_nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("state_block", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("story_nodes", schema=None) as batch_op:
        batch_op.drop_column("state_block")
