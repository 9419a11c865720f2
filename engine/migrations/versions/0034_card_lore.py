"""Story cards' world-info options: secondary keys, logic, probability, order, scan depth…

Revision ID: 0034
Revises: 0033

``lore`` on ``adventure_cards`` and ``scenario_cards``: a JSON object with a card's options as
SillyTavern's World Info entries have them (``engine.prompt.lore``), only those that differ
from the defaults. Existing cards get ``{}``: they match as before.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("adventure_cards", "scenario_cards")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(
                sa.Column("lore", sa.JSON(), nullable=False, server_default=sa.text("'{}'"))
            )


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("lore")
