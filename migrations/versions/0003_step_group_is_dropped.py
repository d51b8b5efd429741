"""step_group.is_dropped: groups dynamic sampling left out of training, kept to inspect

Groups written before this revision were all trained on (false).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 06:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE: SQLite adds and drops the column in place (batch mode would copy it).
def upgrade() -> None:
    op.add_column(
        "step_group",
        sa.Column("is_dropped", sa.Boolean(), server_default=sa.false(), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("step_group", "is_dropped")
