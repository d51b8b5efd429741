"""run_node: the nodes of a run on several machines, each claimed by one worker

Issue 42's gang in the store: a row per claimed node of a run (node rank, worker, the
address the other nodes reach it at, claimed or running, a lease token and an expiry
that its heartbeat pushes on). Runs stored before this revision have no node rows: they
span one machine, owned through run.worker and run.lease as before.

Revision ID: 0014_run_node
Revises: 0013_rescore
Create Date: 2026-12-06 02:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_run_node"
down_revision: str | None = "0013_rescore"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    big_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "run_node",
        sa.Column("id", big_id, primary_key=True, autoincrement=True),
        sa.Column(
            "run_id", sa.String(32), sa.ForeignKey("run.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("node_rank", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(200), nullable=False),
        sa.Column("address", sa.String(200), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("lease", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("run_id", "node_rank", name="uq_run_node_rank"),
    )
    op.create_index("ix_run_node_expires", "run_node", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_run_node_expires", table_name="run_node")
    op.drop_table("run_node")
