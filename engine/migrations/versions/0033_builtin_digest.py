"""Shipped scenarios' digest: start-up refreshes a shipped scenario only when its file changed

Revision ID: 0033
Revises: 0032

``scenarios.builtin_digest``: a digest of the shipped file as Campfire read it
(``engine.library.scenarios.shipped``). Start-up rewrote every shipped scenario, its cards,
scripts and chapter plan at every start of every process; now only one whose digest differs.
Rows seeded before have none, so the next start rewrites them once.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("scenarios", schema=None) as batch_op:
        batch_op.add_column(sa.Column("builtin_digest", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("scenarios", schema=None) as batch_op:
        batch_op.drop_column("builtin_digest")
