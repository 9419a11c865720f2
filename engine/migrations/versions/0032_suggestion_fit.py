"""Whether an adventure's model writes suggested actions (suggestion_fit), so the prompt leaves
them out on a model that does not

Revision ID: 0032
Revises: 0031

``suggestion_fit``: one row per adventure that asked for suggested actions, with the model that
answered (its label) and how many of its replies in a row offered none
(engine.story.suggestions.fit). Kept in the database, as every process plays the adventure's
turns.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "suggestion_fit",
        sa.Column("adventure_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("model", sa.Text(), nullable=False),
        sa.Column("missed", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["adventure_id"], ["adventures.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("adventure_id"),
    )


def downgrade() -> None:
    op.drop_table("suggestion_fit")
