"""run.lease (the owner's fencing token) and run.dispatched_at (when its task was last sent)

`lease` counts claims and never goes back (a resume resets `attempts`, the retry count,
but not this), so a worker that lost its run can never hold a token equal to the new
owner's. `dispatched_at` is NULL when a send failed: the housekeeping sweep re-sends
those, and queued runs nobody claimed since their last send.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 06:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, not batch mode: SQLite adds and drops these columns in place, and
# batch mode's copy-and-drop of `run` would cascade-delete every run's steps.
def upgrade() -> None:
    op.add_column(
        "run", sa.Column("lease", sa.Integer(), server_default=sa.text("0"), nullable=False)
    )
    op.add_column("run", sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True))
    # runs queued before this revision count as sent at submit
    op.execute("UPDATE run SET dispatched_at = created_at WHERE status = 'queued'")


def downgrade() -> None:
    op.drop_column("run", "dispatched_at")
    op.drop_column("run", "lease")
