"""Cards the story proposes to the host every few turns

Revision ID: 0036
Revises: 0035

``adventures.card_proposals``: every how many turns a card is proposed (0: never).
``card_proposals``: one row per proposal, its claim and then its draft card
(``engine.storage.card_proposal_models``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0036"
down_revision: str | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("card_proposals", sa.Integer(), nullable=False, server_default="0")
        )
    op.create_table(
        "card_proposals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("adventure_id", sa.Integer(), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.BigInteger(), nullable=True),
        sa.Column("state", sa.String(length=12), nullable=False),
        sa.Column("title", sa.String(length=100), nullable=False),
        sa.Column("type", sa.String(length=40), nullable=False),
        sa.Column("keys", sa.Text(), nullable=False),
        sa.Column("entry", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["adventure_id"], ["adventures.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["host_id"], ["users.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("adventure_id", "turn", name="uq_card_proposals_turn"),
    )
    with op.batch_alter_table("card_proposals", schema=None) as batch_op:
        batch_op.create_index("ix_card_proposals_adventure_id", ["adventure_id"], unique=False)
        batch_op.create_index("ix_card_proposals_host_id", ["host_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("card_proposals", schema=None) as batch_op:
        batch_op.drop_index("ix_card_proposals_host_id")
        batch_op.drop_index("ix_card_proposals_adventure_id")
    op.drop_table("card_proposals")
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.drop_column("card_proposals")
