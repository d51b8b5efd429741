"""rescore and rescore_group: replays of a run under other rewards

POST /api/runs/{id}/rescore re-scores a run's stored completions under other reward
entries on a worker (grpo/eval/replay.py) and keeps, per replayed group, each completion's
rewards and advantages before and after and the advantages that changed sign. Runs stored
before this revision simply have no replays.

Revision ID: 0013_rescore
Revises: 0012_run_cause
Create Date: 2026-12-04 22:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_rescore"
down_revision: str | None = "0012_run_cause"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    big_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "rescore",
        sa.Column("id", big_id, primary_key=True, autoincrement=True),
        sa.Column(
            "run_id", sa.String(32), sa.ForeignKey("run.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("rewards", sa.JSON(), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("submitted_by", sa.String(200), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_rescore_run", "rescore", ["run_id", "id"])
    op.create_table(
        "rescore_group",
        sa.Column("id", big_id, primary_key=True, autoincrement=True),
        sa.Column(
            "rescore_id", big_id, sa.ForeignKey("rescore.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("group_index", sa.Integer(), nullable=False),
        sa.Column("prompt_id", sa.String(200), nullable=False),
        sa.Column("completions", sa.JSON(), nullable=False),
        sa.Column("flips", sa.JSON(), nullable=False),
        sa.UniqueConstraint("rescore_id", "step", "group_index", name="uq_rescore_group"),
    )


def downgrade() -> None:
    op.drop_table("rescore_group")
    op.drop_index("ix_rescore_run", table_name="rescore")
    op.drop_table("rescore")
