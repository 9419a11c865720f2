"""Which Discord messages show which story node, and which carries a channel's buttons

Revision ID: 0010
Revises: 0009
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "story_messages",
        sa.Column("message_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("channel_id", sa.BigInteger(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("buttons", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["node_id"], ["story_nodes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("message_id"),
    )
    with op.batch_alter_table("story_messages", schema=None) as batch_op:
        batch_op.create_index("ix_story_messages_node_id", ["node_id"], unique=False)
        batch_op.create_index(
            "ix_story_messages_channel_buttons", ["channel_id", "buttons"], unique=False
        )


def downgrade() -> None:
    op.drop_table("story_messages")
