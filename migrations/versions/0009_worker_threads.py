"""worker.threads and worker.omp_wait_policy: the torch threads a worker trains with

A worker sets torch's intra-op threads from the devices it holds and a passive OpenMP wait
policy, unless the user set them (grpo/parallel/threads.py); GET /api/workers shows what
it chose. Rows reported before this revision read back as unknown (null).

Revision ID: 0009_worker_threads
Revises: 0008_run_submitted_by
Create Date: 2026-12-02 00:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_worker_threads"
down_revision: str | None = "0008_run_submitted_by"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE (as 0006): SQLite adds and drops these columns in place.
def upgrade() -> None:
    op.add_column("worker", sa.Column("threads", sa.Integer(), nullable=True))
    op.add_column("worker", sa.Column("omp_wait_policy", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("worker", "omp_wait_policy")
    op.drop_column("worker", "threads")
