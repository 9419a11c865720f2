"""Host controls: a lock and who may rewrite turns on each adventure; its muted players

Revision ID: 0013
Revises: 0012
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Adventures from before this revision are open, with today's rule for rewriting turns.
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("locked", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(
            sa.Column(
                "rewrite_right", sa.String(length=16), nullable=False, server_default="author"
            )
        )
    op.create_table(
        "muted_players",
        sa.Column("adventure_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("kicked", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["adventure_id"], ["adventures.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("adventure_id", "user_id"),
    )


def downgrade() -> None:
    op.drop_table("muted_players")
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.drop_column("rewrite_right")
        batch_op.drop_column("locked")
