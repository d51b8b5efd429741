"""diagnosis.state: the run doctor as the API's last stretch of a stored run left it, so a
long run is diagnosed a stretch at a time and each read costs one stretch, not the run
(app/store/findings.py). Rows from before this revision have none: their runs, if stale,
are diagnosed from the first step, as before.

Revision ID: 0011_diagnosis_state
Revises: 0010_worker_engines
Create Date: 2026-12-03 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_diagnosis_state"
down_revision: str | None = "0010_worker_engines"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE (as 0004, 0006): SQLite adds and drops the column in place.
def upgrade() -> None:
    op.add_column("diagnosis", sa.Column("state", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("diagnosis", "state")
