"""step_group.is_dropped: groups dynamic sampling left out of training, kept to inspect

Groups written before this revision were all trained on (false).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 06:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, as 0003: SQLite adds and drops the column in place.
def upgrade() -> None:
    op.add_column(
        "step_group",
        sa.Column("is_dropped", sa.Boolean(), server_default=sa.false(), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("step_group", "is_dropped")
