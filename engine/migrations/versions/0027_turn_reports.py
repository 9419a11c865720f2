"""Reports of turns to a server's moderators: the server's reports channel and the reports

Revision ID: 0027
Revises: 0026
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("servers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("reports_channel_id", sa.BigInteger(), nullable=True))
    op.create_table(
        "turn_reports",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("server_id", sa.BigInteger(), nullable=False),
        sa.Column("adventure_id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("reporter_id", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("channel_id", sa.BigInteger(), nullable=True),
        sa.Column("message_id", sa.BigInteger(), nullable=True),
        sa.Column("undone_by", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["server_id"], ["servers.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["adventure_id"], ["adventures.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["node_id"], ["story_nodes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("node_id", "reporter_id", name="uq_turn_reports_node_reporter"),
    )
    for column in ("server_id", "adventure_id", "node_id"):
        op.create_index(f"ix_turn_reports_{column}", "turn_reports", [column], unique=False)
    op.create_index(
        "ix_turn_reports_reporter_created", "turn_reports", ["reporter_id", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_turn_reports_reporter_created", table_name="turn_reports")
    for column in ("node_id", "adventure_id", "server_id"):
        op.drop_index(f"ix_turn_reports_{column}", table_name="turn_reports")
    op.drop_table("turn_reports")
    with op.batch_alter_table("servers", schema=None) as batch_op:
        batch_op.drop_column("reports_channel_id")
