"""Card script ids: the id a script gave an adventure's story card

Revision ID: 0017
Revises: 0016
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Empty for every card so far: scripts go on seeing the row's id.
    with op.batch_alter_table("adventure_cards", schema=None) as batch_op:
        batch_op.add_column(sa.Column("script_id", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("adventure_cards", schema=None) as batch_op:
        batch_op.drop_column("script_id")
