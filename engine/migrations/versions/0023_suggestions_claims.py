"""Suggested actions kept with their turn, the scenario's and server's play options, and the
players' claims to characters

Revision ID: 0023
Revises: 0022
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "turn_suggestions",
        sa.Column("node_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("take", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("texts", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["node_id"], ["story_nodes.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("node_id", "take"),
    )
    op.create_table(
        "scenario_play_options",
        sa.Column("scenario_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("suggestions", sa.Boolean(), nullable=False),
        sa.Column("fallback", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["scenario_id"], ["scenarios.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("scenario_id"),
    )
    op.create_table(
        "server_play_options",
        sa.Column("server_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("suggestions", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["server_id"], ["servers.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("server_id"),
    )
    op.create_table(
        "character_claims",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("adventure_id", sa.Integer(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("author_id", sa.BigInteger(), nullable=True),
        sa.Column("character", sa.String(length=160), nullable=False),
        sa.Column("speaker", sa.String(length=160), nullable=False),
        sa.Column("slot", sa.String(length=80), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["adventure_id"], ["adventures.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["node_id"], ["story_nodes.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["author_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("character_claims", schema=None) as batch_op:
        batch_op.create_index("ix_character_claims_adventure_id", ["adventure_id"], unique=False)
        batch_op.create_index("ix_character_claims_node_id", ["node_id"], unique=False)
        batch_op.create_index("ix_character_claims_author_id", ["author_id"], unique=False)
        batch_op.create_index(
            "ix_character_claims_adventure_character", ["adventure_id", "character"], unique=False
        )


def downgrade() -> None:
    op.drop_table("character_claims")
    op.drop_table("server_play_options")
    op.drop_table("scenario_play_options")
    op.drop_table("turn_suggestions")
