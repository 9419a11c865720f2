"""Limits: tokens used on the operator's model per day, rate-limited uses, cool-downs

Revision ID: 0019
Revises: 0018
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "token_use",
        sa.Column("scope", sa.String(length=8), nullable=False),
        sa.Column("subject_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("scope", "subject_id", "day"),
    )
    op.create_table(
        "limit_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_limit_events_user_kind_at", "limit_events", ["user_id", "kind", "at"], unique=False
    )
    op.create_table(
        "limit_cooldowns",
        sa.Column("user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("strikes", sa.Integer(), nullable=False),
        sa.Column("last_strike_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("user_id"),
    )


def downgrade() -> None:
    op.drop_table("limit_cooldowns")
    op.drop_index("ix_limit_events_user_kind_at", table_name="limit_events")
    op.drop_table("limit_events")
    op.drop_table("token_use")
