"""Step rows: one StepReport becomes step, group, sample and event rows in one transaction.

A rewritten step (a run resumed from an earlier checkpoint replays it) replaces the old
rows, never duplicates them. Inserts are batched: one round trip per table.
"""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Select, Text, cast, delete, func, insert, select, update
from sqlalchemy.orm import Session

from app.store.bulk import bulk_insert
from app.store.db import unit
from app.store.events import lock_run_events
from app.store.lease import Lease, hold
from app.store.models import (
    Diagnosis,
    Event,
    GroupOutcome,
    Run,
    Sample,
    StepGroup,
    StepMetric,
)
from grpo.report import GroupReport, StepReport

SUMMARY_KEYS = ("reward", "reward_std", "kl", "loss")


def compact_scalars(scalars: dict[str, float]) -> dict[str, float]:
    """Seven significant digits: what the float32 they were computed in holds, in half the
    JSON text (the metrics of a long run are read whole by every chart)."""
    return {key: float(f"{value:.7g}") for key, value in scalars.items()}


@unit
def save_step(
    session: Session, run_id: str, report: StepReport, *, lease: Lease | None = None
) -> None:
    """Write one step (replacing an earlier write of the same step) and its event.

    With the worker's `lease`, nothing is written unless it still owns the run (LeaseLost).
    """
    report = replace(report, scalars=compact_scalars(report.scalars))
    if lease is None:
        lock_run_events(session, run_id)
    else:
        hold(session, lease)
    if _is_written(session, run_id, report.step):
        _delete_step(session, run_id, report.step)  # a resumed run replays this step
    session.execute(insert(StepMetric), [_metric_row(run_id, report)])
    bulk_insert(session, StepGroup, [_group_row(run_id, report.step, g) for g in report.groups])
    samples = [_sample_row(run_id, report.step, g) for g in report.groups if g.completions]
    bulk_insert(session, Sample, samples)
    session.add(Event(run_id=run_id, kind="step", step=report.step, payload=step_payload(report)))
    summary = {k: report.scalars[k] for k in SUMMARY_KEYS if k in report.scalars}
    session.execute(
        update(Run).where(Run.id == run_id).values(step=report.step, last_metrics=summary)
    )


def _is_written(session: Session, run_id: str, step: int) -> bool:
    stmt = select(StepMetric.id).where(StepMetric.run_id == run_id, StepMetric.step == step)
    return session.scalar(stmt) is not None


def _delete_step(session: Session, run_id: str, step: int) -> None:
    for table in (StepMetric, StepGroup, Sample):
        session.execute(delete(table).where(table.run_id == run_id, table.step == step))
    session.execute(
        delete(Event).where(Event.run_id == run_id, Event.kind == "step", Event.step == step)
    )
    forget_doctor(session, run_id)


def forget_doctor(session: Session, run_id: str) -> None:
    """Drop the doctor a stored run's diagnosis keeps (findings.py): a step it read is being
    rewritten, so its next stretch starts from the first step again."""
    session.execute(update(Diagnosis).where(Diagnosis.run_id == run_id).values(state=None))


def step_payload(report: StepReport) -> dict[str, Any]:
    return {
        "step": report.step,
        "metrics": report.scalars,
        "advantage_histogram": report.advantage_histogram,
        "reward_histogram": report.reward_histogram,
        "group_reward_std_histogram": report.group_reward_std_histogram,
    }


def _metric_row(run_id: str, report: StepReport) -> dict[str, Any]:
    return {"run_id": run_id, **step_payload(report)}


def _group_row(run_id: str, step: int, group: GroupReport) -> dict[str, Any]:
    completions = group.completions or []
    return {
        "run_id": run_id,
        "step": step,
        "index": group.index,
        "prompt_id": group.prompt_id,
        "prompt": group.prompt,
        "answer": group.answer,
        "rewards": group.rewards,
        "advantages": group.advantages,
        "reward_mean": group.reward_mean,
        "reward_std": group.reward_std,
        "outcome": group.outcome,
        "has_truncated": any(c.is_truncated for c in completions),
        "has_completions": bool(completions),
        "is_dropped": group.is_dropped,
    }


def _sample_row(run_id: str, step: int, group: GroupReport) -> dict[str, Any]:
    completions = [
        {
            "text": c.text,
            "num_tokens": c.num_tokens,
            "is_truncated": c.is_truncated,
            "rewards": c.rewards,
            "reward": c.reward,
            "advantage": c.advantage,
            "kl": c.kl,
            "token_kls": c.token_kls,
            "tokens": c.tokens,
            "finish_reason": c.finish_reason,
            "stop": c.stop,
            "stop_token_id": c.stop_token_id,
            "note": c.note,
            "extras": c.extras,
            "trajectory": c.trajectory,
            "model_mask": c.model_mask,
            "policy_version": c.policy_version,
            "sampler_logps": c.sampler_logps,
        }
        for c in group.completions or []
    ]
    return {"run_id": run_id, "step": step, "group_index": group.index, "completions": completions}


def step_range(
    columns: list[Any], run_id: str, after_step: int, before_step: int | None = None
) -> Select[Any]:
    """`columns` of the run's step rows after `after_step` and before `before_step` (if given)."""
    stmt = select(*columns).where(StepMetric.run_id == run_id, StepMetric.step > after_step)
    return stmt if before_step is None else stmt.where(StepMetric.step < before_step)


def list_metrics(
    conn: Connection,
    run_id: str,
    *,
    after_step: int = -1,
    before_step: int | None = None,
    limit: int | None = None,
    keys: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Step scalars in step order (step 0: the evaluation before training, app/store/evals.py),
    optionally only some keys; every step of the range unless `limit`."""
    stmt = step_range([StepMetric.step, StepMetric.metrics], run_id, after_step, before_step)
    rows = conn.execute(stmt.order_by(StepMetric.step).limit(limit)).all()
    if keys:
        return [{"step": s, "metrics": {k: m[k] for k in keys if k in m}} for s, m in rows]
    return [{"step": s, "metrics": m} for s, m in rows]


class GroupFilter(StrEnum):
    """One kind of a step's groups: an outcome, no reward spread, a completion cut short, or
    the groups dynamic sampling left out (every other filter lists trained groups only)."""

    ALL_FAIL = GroupOutcome.ALL_FAIL
    ALL_PASS = GroupOutcome.ALL_PASS
    MIXED = GroupOutcome.MIXED
    ZERO_STD = "zero_std"
    TRUNCATED = "truncated"
    DROPPED = "dropped"


@unit
def list_groups(
    session: Session, run_id: str, step: int, *, only: GroupFilter | None = None
) -> list[StepGroup]:
    """The groups a step trained on, in step order, optionally only one kind; `dropped`
    lists instead those dynamic sampling left out."""
    stmt = select(StepGroup).where(
        StepGroup.run_id == run_id,
        StepGroup.step == step,
        StepGroup.is_dropped.is_(only == GroupFilter.DROPPED),
    )
    match only:
        case None | GroupFilter.DROPPED:
            pass
        case GroupFilter.ZERO_STD:
            stmt = stmt.where(StepGroup.reward_std == 0)
        case GroupFilter.TRUNCATED:
            stmt = stmt.where(StepGroup.has_truncated.is_(True))
        case _:
            stmt = stmt.where(StepGroup.outcome == GroupOutcome(only))
    return list(session.scalars(stmt.order_by(StepGroup.index)))


@unit
def get_group(
    session: Session, run_id: str, step: int, index: int
) -> tuple[StepGroup, list[dict[str, Any]]] | None:
    group = session.scalar(
        select(StepGroup).where(
            StepGroup.run_id == run_id, StepGroup.step == step, StepGroup.index == index
        )
    )
    if group is None:
        return None
    completions = session.scalar(
        select(Sample.completions).where(
            Sample.run_id == run_id, Sample.step == step, Sample.group_index == index
        )
    )
    return group, list(completions or [])


@unit
def prompt_history(session: Session, run_id: str, prompt_id: str) -> list[StepGroup]:
    """One prompt's groups across steps, in step order."""
    stmt = (
        select(StepGroup)
        .where(StepGroup.run_id == run_id, StepGroup.prompt_id == prompt_id)
        .order_by(StepGroup.step, StepGroup.index)
    )
    return list(session.scalars(stmt))


EXPORTED_GROUP_FIELDS = (
    "step", "index", "prompt_id", "prompt", "answer", "rewards", "advantages",
    "reward_mean", "reward_std", "outcome",
)  # fmt: skip


def groups_after(
    conn: Connection, run_id: str, after: tuple[int, int], *, limit: int = 1000
) -> list[dict[str, Any]]:
    """A page of the run's groups after (step, index), in that order, as exported: an
    export streams them one page and one borrowed connection at a time."""
    step, index = after
    stmt = (
        select(*(getattr(StepGroup, name) for name in EXPORTED_GROUP_FIELDS))
        .where(StepGroup.run_id == run_id)
        .where((StepGroup.step > step) | ((StepGroup.step == step) & (StepGroup.index > index)))
        .order_by(StepGroup.step, StepGroup.index)
        .limit(limit)
    )
    return [dict(row) for row in conn.execute(stmt).mappings()]


def last_event_id(conn: Connection, run_id: str) -> int:
    """Id of the run's newest event (0 when none): where a stream after a snapshot resumes."""
    return conn.scalar(select(func.max(Event.id)).where(Event.run_id == run_id)) or 0


def metrics_json(
    conn: Connection,
    run_id: str,
    *,
    after_step: int = -1,
    before_step: int | None = None,
    limit: int | None,
    after_event: int | None = None,
) -> str:
    """A page of the metrics list as a JSON document, spliced from the stored JSON text
    unparsed: every step of the range, or the first `limit` of them and, when more follow,
    `next_after_step` (the step to ask after for the next page).

    Parsing and re-serialising 10,000 rows of ~30 scalars costs more than the query itself.
    `after_event` is the run's newest event id when the caller has read it already.
    """
    stmt = step_range(
        [StepMetric.step, cast(StepMetric.metrics, Text)], run_id, after_step, before_step
    ).order_by(StepMetric.step)
    # Read before the rows: a stream resumed from this id can repeat a step, never skip one.
    if after_event is None:
        after_event = last_event_id(conn, run_id)
    rows = conn.execute(stmt.limit(None if limit is None else limit + 1)).all()
    after = rows[limit - 1][0] if limit is not None and len(rows) > limit else None
    items = ",".join(f'{{"step":{s},"metrics":{m}}}' for s, m in rows[:limit])
    return (
        f'{{"last_event_id":{after_event},"items":[{items}],'
        f'"next_after_step":{"null" if after is None else after},"thinned":null}}'
    )
