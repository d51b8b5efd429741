"""finding and diagnosis: what the run doctor found, and how far it has read each run

The doctor (grpo/doctor/) diagnoses runs as their steps arrive; runs stored before this
revision have no rows and are diagnosed from their stored steps when first read.

Revision ID: 0007_doctor
Revises: 0006
Create Date: 2026-12-01 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_doctor"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    big_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "finding",
        sa.Column("id", big_id, primary_key=True, autoincrement=True),
        sa.Column(
            "run_id", sa.String(32), sa.ForeignKey("run.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("key", sa.String(80), nullable=False),
        sa.Column("rule", sa.String(40), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("first_step", sa.Integer(), nullable=False),
        sa.Column("last_step", sa.Integer(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.UniqueConstraint("run_id", "key", name="uq_finding_run_key"),
    )
    op.create_index("ix_finding_status_run", "finding", ["status", "run_id"])
    op.create_table(
        "diagnosis",
        sa.Column(
            "run_id",
            sa.String(32),
            sa.ForeignKey("run.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("rules_version", sa.Integer(), nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
    )


def downgrade() -> None:
    op.drop_table("diagnosis")
    op.drop_index("ix_finding_status_run", table_name="finding")
    op.drop_table("finding")
