"""Chapters and beats: a scenario's plan, the copy an adventure plays, chapter recaps

Revision ID: 0022
Revises: 0021
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "scenario_chapters",
        sa.Column("scenario_id", sa.Integer(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["scenario_id"], ["scenarios.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("scenario_id"),
    )
    op.create_table(
        "adventure_chapters",
        sa.Column("adventure_id", sa.Integer(), nullable=False),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["adventure_id"], ["adventures.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("adventure_id"),
    )
    op.create_table(
        "chapter_recaps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("adventure_id", sa.Integer(), nullable=False),
        sa.Column("chapter_id", sa.String(length=40), nullable=False),
        sa.Column("chapter_index", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("take", sa.Integer(), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("epilogue", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["adventure_id"], ["adventures.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("adventure_id", "chapter_id", "version", name="uq_chapter_recaps"),
    )
    op.create_index(
        op.f("ix_chapter_recaps_adventure_id"), "chapter_recaps", ["adventure_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_chapter_recaps_adventure_id"), table_name="chapter_recaps")
    op.drop_table("chapter_recaps")
    op.drop_table("adventure_chapters")
    op.drop_table("scenario_chapters")
