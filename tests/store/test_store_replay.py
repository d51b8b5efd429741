"""A resumed run replays steps after its checkpoint: rewrites replace rows, never add them."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.store import db, runs, steps
from app.store.models import Event, Sample, StepGroup, StepMetric
from grpo.report import CompletionReport, GroupReport, StepReport
from grpo.spec import JobSpec
from tests.store_fixture import session, store

__all__ = ["session", "store"]


def report(step: int, reward: float) -> StepReport:
    completion = CompletionReport(
        text="4",
        num_tokens=1,
        is_truncated=False,
        rewards={"accuracy": reward},
        reward=reward,
        advantage=0.0,
        kl=0.0,
    )
    group = GroupReport(
        index=0,
        prompt_id="2+2",
        prompt="2+2=",
        answer="4",
        rewards=[reward, 0.0],
        advantages=[1.0, -1.0],
        completions=[completion, completion],
        passes=[reward >= 1, False],
    )
    return StepReport(step=step, total_steps=6, scalars={"reward": reward}, groups=[group])


def test_replayed_steps_replace_their_rows_and_events(session: Session) -> None:
    run, _ = runs.create_run(
        session, JobSpec(model="builtin:tiny", max_steps=6), package_version="t"
    )
    for step in range(1, 6):
        steps.save_step(session, run.id, report(step, 0.0))
    for step in range(3, 7):  # resumed from the checkpoint at step 2
        steps.save_step(session, run.id, report(step, 1.0))
    with db.session() as reader:
        for table in (StepMetric, StepGroup, Sample):
            per_step = (
                select(table.step, func.count())
                .where(table.run_id == run.id)
                .group_by(table.step)
                .order_by(table.step)
            )
            rows = [tuple(r) for r in reader.execute(per_step).all()]
            assert rows == [(k, 1) for k in range(1, 7)], (table, rows)
        kinds = select(Event.step).where(Event.run_id == run.id, Event.kind == "step")
        assert list(reader.scalars(kinds.order_by(Event.id))) == [1, 2, 3, 4, 5, 6]
    rewards = [m["metrics"]["reward"] for m in db.read(steps.list_metrics, run.id)]
    assert rewards == [0.0, 0.0, 1.0, 1.0, 1.0, 1.0], rewards
    assert runs.get_run(session, run.id).step == 6
