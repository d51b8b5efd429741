"""run.cause: what a failed run's error comes from

The exception behind a failed run's one-line `error`: its type, message and the last
frames of its traceback, secrets scrubbed and bounded (grpo/cause.py), shown by
GET /api/runs/{id} and the run page. Runs stored before this revision have none (NULL),
as do runs that did not fail.

Revision ID: 0012_run_cause
Revises: 0011_diagnosis_state
Create Date: 2026-12-04 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_run_cause"
down_revision: str | None = "0011_diagnosis_state"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE (as 0004, 0008): SQLite adds and drops a nullable column in place.
def upgrade() -> None:
    op.add_column("run", sa.Column("cause", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("run", "cause")
