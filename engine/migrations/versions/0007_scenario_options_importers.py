"""Scenario options (a scenario that is a menu of others) and the server's importer role

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("scenarios", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parent_id", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_scenarios_parent_id"), ["parent_id"], unique=False)
        batch_op.create_foreign_key(
            "fk_scenarios_parent_id", "scenarios", ["parent_id"], ["id"], ondelete="CASCADE"
        )
    with op.batch_alter_table("servers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("importer_role_id", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("servers", schema=None) as batch_op:
        batch_op.drop_column("importer_role_id")
    with op.batch_alter_table("scenarios", schema=None) as batch_op:
        batch_op.drop_constraint("fk_scenarios_parent_id", type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_scenarios_parent_id"))
        batch_op.drop_column("parent_id")
