"""The party: whether the host closed it, and the players who joined or left it; one name
per character in an adventure, held by the database

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
        # The player's own choice: it goes with their data (/profile delete, guest cleanup).
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("adventure_id", "user_id"),
    )

    # The name as compared (case-folded in Python from now on; SQL's lower() for the rows
    # already there, whose names the old check kept apart the same way).
    with op.batch_alter_table("characters", schema=None) as batch_op:
        batch_op.add_column(sa.Column("name_key", sa.String(length=160), nullable=True))
    op.execute("UPDATE characters SET name_key = lower(name)")
    with op.batch_alter_table("characters", schema=None) as batch_op:
        batch_op.alter_column("name_key", existing_type=sa.String(length=160), nullable=False)
        batch_op.create_unique_constraint("uq_characters_name", ["adventure_id", "name_key"])


def downgrade() -> None:
    with op.batch_alter_table("characters", schema=None) as batch_op:
        batch_op.drop_constraint("uq_characters_name", type_="unique")
        batch_op.drop_column("name_key")
    op.drop_table("party_seats")
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.drop_column("party_closed")
