"""Characters' pronouns: what the story calls a character where it does not use their name

Revision ID: 0035
Revises: 0034

``characters.pronouns``: the five forms a player set with ``/character set pronouns:``
(``engine.story.pronouns``), "" for the singular "they" every character had before.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0035"
down_revision: str | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("characters", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("pronouns", sa.String(length=64), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("characters", schema=None) as batch_op:
        batch_op.drop_column("pronouns")
