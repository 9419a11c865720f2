"""Every per-server setting on the server's row: the suggestions switch moves from
server_play_options onto servers

Revision ID: 0024
Revises: 0023
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A server without a row of options had suggestions on.
    with op.batch_alter_table("servers", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("suggestions", sa.Boolean(), nullable=False, server_default=sa.true())
        )
    op.execute(
        "UPDATE servers SET suggestions = ("
        "SELECT o.suggestions FROM server_play_options o WHERE o.server_id = servers.id"
        ") WHERE id IN (SELECT server_id FROM server_play_options)"
    )
    op.drop_table("server_play_options")


def downgrade() -> None:
    op.create_table(
        "server_play_options",
        sa.Column("server_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("suggestions", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["server_id"], ["servers.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("server_id"),
    )
    op.execute(
        "INSERT INTO server_play_options (server_id, suggestions) "
        "SELECT id, suggestions FROM servers WHERE NOT suggestions"
    )
    with op.batch_alter_table("servers", schema=None) as batch_op:
        batch_op.drop_column("suggestions")
