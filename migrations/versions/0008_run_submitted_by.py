"""run.submitted_by: the name of the token that submitted a run (its owner)

Tokens carry a name and a role (app/identity.py); cancel, resume, delete and weight
downloads are for a run's owner or an admin. Runs stored before this revision have no
owner (NULL): only an admin acts on them.

Revision ID: 0008_run_submitted_by
Revises: 0007_doctor
Create Date: 2026-12-02 00:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_run_submitted_by"
down_revision: str | None = "0007_doctor"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE (as 0004): SQLite adds and drops a nullable column in place.
def upgrade() -> None:
    op.add_column("run", sa.Column("submitted_by", sa.String(200), nullable=True))


def downgrade() -> None:
    op.drop_column("run", "submitted_by")
