"""The party: whether the host closed it, and the players who joined or left it

Revision ID: 0016
Revises: 0015
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Every adventure from before this revision has an open party: whoever acted or made a
    # character is in it, as before, and nobody has left.
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("party_closed", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "party_seats",
        sa.Column("adventure_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("seated", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["adventure_id"], ["adventures.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("adventure_id", "user_id"),
    )


def downgrade() -> None:
    op.drop_table("party_seats")
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.drop_column("party_closed")
