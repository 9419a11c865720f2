"""Scenario openings: the openings a player chooses from at /start, besides the scenario's prompt

Revision ID: 0031
Revises: 0029

``scenario_openings``: a character card's alternate greetings (and its V3 group-only ones),
kept in order beside the scenario and deleted with it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scenario_openings",
        sa.Column("scenario_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("group_only", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["scenario_id"], ["scenarios.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("scenario_id", "position"),
    )


def downgrade() -> None:
    op.drop_table("scenario_openings")
