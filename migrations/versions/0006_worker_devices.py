"""worker.device_kind and worker.devices: the GPUs or CPU slots a worker holds

A worker holds several devices (`grpo worker --devices 0,1,2,3`) and takes runs whose
`resources.num_processes` fits them. Rows reported before this revision are of workers
that held one device; they read back as one CPU slot until they report again.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 09:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE (as 0004): SQLite adds and drops these columns in place.
def upgrade() -> None:
    op.add_column(
        "worker",
        sa.Column("device_kind", sa.String(8), server_default=sa.text("'cpu'"), nullable=False),
    )
    op.add_column(
        "worker",
        sa.Column("devices", sa.JSON(), server_default=sa.text("'[\"0\"]'"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("worker", "devices")
    op.drop_column("worker", "device_kind")
