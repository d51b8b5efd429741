"""worker.address and run.waiting_for: who can hold a node of a run on several machines,
and what a queued run waits for (issue 42 item 1)

worker.address is the GRPO_WORKER_ADDRESS a training worker reports (null: it takes no
node of a run on several machines); submit counts the workers that could hold a node of a
run with `resources.num_nodes` > 1 from it (app/api/checks/nodes.py). run.waiting_for is
one line saying what a queued run waits for (its gang, or why a worker left it queued:
app/store/waiting.py), null when nothing is said or the run is not queued. Rows stored
before this revision read back as null: a worker reports its address again at its next
beat.

Revision ID: 0016_worker_address_run_wait
Revises: 0015_generation_server
Create Date: 2026-12-06 08:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_worker_address_run_wait"
down_revision: str | None = "0015_generation_server"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE (as 0006, 0015): SQLite adds and drops the columns in place.
def upgrade() -> None:
    op.add_column("worker", sa.Column("address", sa.String(300), nullable=True))
    op.add_column("run", sa.Column("waiting_for", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("run", "waiting_for")
    op.drop_column("worker", "address")
