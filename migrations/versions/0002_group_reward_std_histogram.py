"""step_metric.group_reward_std_histogram: every group of a step counted by its reward std

Steps written before this revision read back an empty histogram ('[]'), which the
dashboard shows as a step with no spread recorded.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("step_metric", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "group_reward_std_histogram",
                sa.JSON(),
                server_default=sa.text("'[]'"),
                nullable=False,
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("step_metric", schema=None) as batch_op:
        batch_op.drop_column("group_reward_std_histogram")
