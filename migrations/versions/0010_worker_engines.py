"""worker.engines: the generation engines a worker can run (`native`, and `vllm` when vLLM
is installed), listed by GET /api/workers beside its devices; a worker without vllm
declines use_vllm runs. Rows reported before this revision read back as native only until
their worker reports again.

Revision ID: 0010_worker_engines
Revises: 0009_worker_threads
Create Date: 2026-12-02 00:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_worker_engines"
down_revision: str | None = "0009_worker_threads"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE (as 0004, 0006): SQLite adds and drops the column in place.
def upgrade() -> None:
    op.add_column(
        "worker",
        sa.Column("engines", sa.JSON(), server_default=sa.text("'[\"native\"]'"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("worker", "engines")
