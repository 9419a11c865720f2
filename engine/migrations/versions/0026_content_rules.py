"""Content rules: a server's content rating and banned words, an adventure's banned words and
whether Discord marks its place age-restricted, a player's own rating for their DMs, a
scenario's rating

Revision ID: 0026
Revises: 0025
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EMPTY = sa.text("'[]'")


def upgrade() -> None:
    with op.batch_alter_table("servers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("content_rating", sa.String(length=8), nullable=True))
        batch_op.add_column(
            sa.Column("banned_words", sa.JSON(), nullable=False, server_default=EMPTY)
        )
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("banned_words", sa.JSON(), nullable=False, server_default=EMPTY)
        )
        batch_op.add_column(
            sa.Column("age_restricted", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.add_column(sa.Column("content_rating", sa.String(length=8), nullable=True))
    with op.batch_alter_table("scenarios", schema=None) as batch_op:
        batch_op.add_column(sa.Column("content_rating", sa.String(length=8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scenarios", schema=None) as batch_op:
        batch_op.drop_column("content_rating")
    with op.batch_alter_table("users", schema=None) as batch_op:
        batch_op.drop_column("content_rating")
    with op.batch_alter_table("adventures", schema=None) as batch_op:
        batch_op.drop_column("age_restricted")
        batch_op.drop_column("banned_words")
    with op.batch_alter_table("servers", schema=None) as batch_op:
        batch_op.drop_column("banned_words")
        batch_op.drop_column("content_rating")
