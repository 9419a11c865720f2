"""Story tree: the state each node leaves behind, for Redo, branch switches and save points

Revision ID: 0005
Revises: 0004
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("story_nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("state_after", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("story_nodes", schema=None) as batch_op:
        batch_op.drop_column("state_after")
