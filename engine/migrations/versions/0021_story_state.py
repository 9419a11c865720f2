"""Story state: the typed narrative state of an adventure, and its change log

Revision ID: 0021
Revises: 0020
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("story_state", sa.JSON(), nullable=False, server_default=sa.text("'{}'"))
        )
        batch_op.add_column(
            sa.Column("story_tracking", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "story_state_changes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("adventure_id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("take", sa.Integer(), nullable=False),
        sa.Column("turn_index", sa.Integer(), nullable=False),
        sa.Column("by", sa.String(length=8), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("event", sa.JSON(), nullable=True),
        sa.Column("reason", sa.String(length=300), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["adventure_id"], ["adventures.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["node_id"], ["story_nodes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_story_state_changes_adventure_id", "story_state_changes", ["adventure_id"])
    op.create_index("ix_story_state_changes_node_id", "story_state_changes", ["node_id"])
    op.create_index("ix_story_state_changes_node_take", "story_state_changes", ["node_id", "take"])


def downgrade() -> None:
    op.drop_index("ix_story_state_changes_node_take", table_name="story_state_changes")
    op.drop_index("ix_story_state_changes_node_id", table_name="story_state_changes")
    op.drop_index("ix_story_state_changes_adventure_id", table_name="story_state_changes")
    op.drop_table("story_state_changes")
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.drop_column("story_tracking")
        batch_op.drop_column("story_state")
