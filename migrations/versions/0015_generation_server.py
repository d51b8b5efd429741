"""Generation workers (issue 41 item 2): run.needs_generation marks a `vllm_mode: server`
run submitted with no server address, which the service places on a training worker plus
a generation worker (`grpo worker --generation`); run.generation_worker is the generation
worker that took the run's current claim (run.generation_lease: that claim's lease) and
run.generation_url the address of the vLLM server it started for it, which the training
worker's run uses as if given. worker.role says which kind of worker a row is, and
worker.serving what a generation worker serves (run id, model, URL).

Revision ID: 0015_generation_server
Revises: 0014_run_node
Create Date: 2026-12-06 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_generation_server"
down_revision: str | None = "0014_run_node"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE (as 0004, 0006): SQLite adds and drops the columns in place.
def upgrade() -> None:
    op.add_column(
        "run",
        sa.Column(
            "needs_generation", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
    )
    op.add_column("run", sa.Column("generation_worker", sa.String(200), nullable=True))
    op.add_column("run", sa.Column("generation_lease", sa.Integer(), nullable=True))
    op.add_column("run", sa.Column("generation_url", sa.String(2000), nullable=True))
    op.add_column(
        "worker",
        sa.Column("role", sa.String(16), server_default=sa.text("'training'"), nullable=False),
    )
    op.add_column("worker", sa.Column("serving", sa.JSON(), nullable=True))


def downgrade() -> None:
    for column in ("serving", "role"):
        op.drop_column("worker", column)
    for column in ("generation_url", "generation_lease", "generation_worker", "needs_generation"):
        op.drop_column("run", column)
