"""checkpoint.num_bytes and checkpoint.is_final, now that the worker records its checkpoints

The table existed from the start but nobody wrote it; rows are its checkpoints on disk.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 06:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE (as 0004): SQLite adds and drops these columns in place.
def upgrade() -> None:
    op.add_column(
        "checkpoint",
        sa.Column("num_bytes", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
    )
    op.add_column(
        "checkpoint",
        sa.Column("is_final", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("checkpoint", "is_final")
    op.drop_column("checkpoint", "num_bytes")
