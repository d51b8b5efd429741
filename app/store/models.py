"""Tables: runs, their steps, groups, samples, log lines, events, checkpoints, datasets.

The database is the log: everything a run produced is a row here, and live streams read
the `event` table in id order. Alembic migrations in migrations/ create this schema.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

# the API reads a group's outcome names through the store, not the training library
from grpo.report import GroupOutcome as GroupOutcome

# SQLite only autoincrements INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT identity.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class RunStatus(StrEnum):
    """Where a run is: queued -> running -> one of the final three; resume sends a failed or
    cancelled run back to queued, and a stale running one is re-queued or failed. The API's
    `status` (and so the dashboard's type of it) is this enum."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL_STATUSES = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """Timestamps stored in UTC and always read back timezone-aware (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        return value.astimezone(UTC) if value is not None and value.tzinfo else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Run(Base):
    __tablename__ = "run"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.QUEUED)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    package_version: Mapped[str] = mapped_column(String(40))
    queue: Mapped[str] = mapped_column(String(64))
    idempotency_key: Mapped[str | None] = mapped_column(String(200), unique=True)
    submitted_by: Mapped[str | None] = mapped_column(String(200))
    """The name of the token that submitted it (app/identity.py); NULL on an open service
    and for runs from before owners: those are an admin's to act on."""
    step: Mapped[int] = mapped_column(Integer, default=0)
    total_steps: Mapped[int] = mapped_column(Integer)
    last_metrics: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    cause: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """What a failed run's `error` comes from: {type, message, frames: [{file, line, function,
    code}], omitted_frames} (grpo/cause.py); NULL for other runs and those from before it."""
    worker: Mapped[str | None] = mapped_column(String(200))
    device: Mapped[str | None] = mapped_column(String(100))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    """Claims since submit or the last resume: what the retry limit counts."""
    lease: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    """The current owner's fencing token: +1 on every claim, never reset (app/store/lease.py)."""
    is_cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    heartbeat_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    dispatched_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    """When its task was last sent; NULL when the send failed (the sweep re-sends it)."""
    needs_generation: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=text("false")
    )
    """A `vllm_mode: server` run submitted with no server address: a generation worker
    starts its vLLM server (app/store/generation.py)."""
    generation_worker: Mapped[str | None] = mapped_column(String(200))
    """The generation worker serving the claim whose lease is `generation_lease`."""
    generation_lease: Mapped[int | None] = mapped_column(Integer)
    generation_url: Mapped[str | None] = mapped_column(String(2000))
    """Where that worker's vLLM server answers, once it does."""
    waiting_for: Mapped[str | None] = mapped_column(Text)
    """What a queued run waits for, in one line (its gang's nodes, or why a worker left it
    queued: app/store/waiting.py); NULL when nothing is said. Cleared when it is claimed
    or ends."""

    __table_args__ = (
        Index("ix_run_status_created", "status", "created_at"),
        Index("ix_run_created", "created_at", "id"),
    )


class StepMetric(Base):
    __tablename__ = "step_metric"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    advantage_histogram: Mapped[list[Any]] = mapped_column(JSON)
    reward_histogram: Mapped[list[Any]] = mapped_column(JSON)
    group_reward_std_histogram: Mapped[list[Any]] = mapped_column(JSON, server_default=text("'[]'"))
    """Groups counted by reward std; [] on steps written before it was recorded."""
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )

    __table_args__ = (UniqueConstraint("run_id", "step", name="uq_step_metric_run_step"),)


class StepGroup(Base):
    __tablename__ = "step_group"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    index: Mapped[int] = mapped_column(Integer)
    prompt_id: Mapped[str] = mapped_column(String(200))
    prompt: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text)
    rewards: Mapped[list[Any]] = mapped_column(JSON)
    advantages: Mapped[list[Any]] = mapped_column(JSON)
    reward_mean: Mapped[float] = mapped_column(Float)
    reward_std: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(String(16))
    """all_fail, all_pass or mixed."""
    has_truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    has_completions: Mapped[bool] = mapped_column(Boolean, default=False)
    is_dropped: Mapped[bool] = mapped_column(Boolean, default=False)
    """Left out of training by dynamic sampling (all rewards equal); kept for the inspector."""

    __table_args__ = (
        UniqueConstraint("run_id", "step", "index", name="uq_step_group_run_step_index"),
        Index("ix_step_group_run_prompt", "run_id", "prompt_id"),
    )


class Sample(Base):
    """The kept completions of one group: one document of G completions, written and read
    together (one row per group, not per completion: a step of 64 x 16 is 64 rows)."""

    __tablename__ = "sample"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    group_index: Mapped[int] = mapped_column(Integer)
    completions: Mapped[list[Any]] = mapped_column(JSON)
    """[{text, num_tokens, is_truncated, rewards, reward, advantage, kl, token_kls, tokens}],
    in order."""

    __table_args__ = (
        UniqueConstraint("run_id", "step", "group_index", name="uq_sample_run_step_group"),
    )


class LogLine(Base):
    __tablename__ = "log_line"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    level: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )


class Event(Base):
    """The run's log in order: what a live stream replays after Last-Event-ID."""

    __tablename__ = "event"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16))
    """step, eval, status or log."""
    step: Mapped[int | None] = mapped_column(Integer)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )

    __table_args__ = (
        Index("ix_event_run_id", "run_id", "id"),
        Index("ix_event_run_step", "run_id", "step"),
    )


class NodeState(StrEnum):
    """Where one node of a run on several machines is (issue 42): claimed by a worker that
    holds its devices while the gang forms, checked once it showed it sees the files the
    nodes share, then running its ranks."""

    CLAIMED = "claimed"
    CHECKED = "checked"
    """Its marker is written in the run's directory (worker/gang_check.py)."""
    RUNNING = "running"
    """Node 0: every node passed the check and may launch its ranks; the others: launched."""


class RunNode(Base):
    """One node of a run on several machines (`resources.num_nodes` > 1): the worker that
    claimed it, the address the other nodes reach it at, and a lease of its own that expires
    unless beaten (app/store/nodes.py). A run's gang is its live node rows; the store part
    of issue 42 item 2, not yet used by the worker's run path."""

    __tablename__ = "run_node"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    node_rank: Mapped[int] = mapped_column(Integer)
    """0..num_nodes-1; node 0's worker serves the rendezvous."""
    worker: Mapped[str] = mapped_column(String(200))
    address: Mapped[str] = mapped_column(String(200))
    """Where the other nodes reach this node's worker (GRPO_WORKER_ADDRESS)."""
    state: Mapped[str] = mapped_column(String(16), default=NodeState.CLAIMED)
    lease: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    """Fencing token of this row: +1 each time another worker takes the node over."""
    claimed_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime())
    """Past this without a heartbeat the claim is void: another worker may take the node,
    and the sweep releases it."""

    __table_args__ = (
        UniqueConstraint("run_id", "node_rank", name="uq_run_node_rank"),
        Index("ix_run_node_expires", "expires_at"),
    )


class Checkpoint(Base):
    """A checkpoint of a run that is on disk: the worker records each one it renames into
    place and drops the rows of those its pruning removed (app/store/checkpoints.py)."""

    __tablename__ = "checkpoint"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    num_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    is_final: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    """Written when the run reached max_steps: the model it ends with."""
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )


class Dataset(Base):
    __tablename__ = "dataset"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    num_records: Mapped[int] = mapped_column(Integer)
    num_bytes: Mapped[int] = mapped_column(BigInteger)
    fields: Mapped[list[Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )


class WorkerState(Base):
    """A live worker as it last reported itself (GET /api/workers)."""

    __tablename__ = "worker"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    queues: Mapped[str] = mapped_column(String(500))
    device: Mapped[str] = mapped_column(String(200))
    """The device its runs' rank 0 trains on (`cuda:0 (NVIDIA H100 ...)`, `cpu`)."""
    device_kind: Mapped[str] = mapped_column(String(8), server_default=text("'cpu'"))
    """`cuda` or `cpu`: what `devices` are."""
    devices: Mapped[list[Any]] = mapped_column(JSON, server_default=text("'[\"0\"]'"))
    """The GPUs it holds (CUDA_VISIBLE_DEVICES ids) or its CPU slots (0..n-1): one rank each."""
    engines: Mapped[list[Any]] = mapped_column(JSON, server_default=text("'[\"native\"]'"))
    """Generation engines it can run: `native`, and `vllm` when vLLM is installed."""
    free_memory_mb: Mapped[int | None] = mapped_column(Integer)
    threads: Mapped[int | None] = mapped_column(Integer)
    """torch's intra-op threads its runs train with (grpo/parallel/threads.py)."""
    omp_wait_policy: Mapped[str | None] = mapped_column(String(16))
    """OMP_WAIT_POLICY of its process: PASSIVE unless the user set it."""
    run_id: Mapped[str | None] = mapped_column(String(32))
    role: Mapped[str] = mapped_column(
        String(16), default="training", server_default=text("'training'")
    )
    """`training`, or `generation` (`grpo worker --generation`: it serves runs' vLLM servers)."""
    serving: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """A generation worker's server while it runs: {run_id, model, url}."""
    address: Mapped[str | None] = mapped_column(String(300))
    """Its GRPO_WORKER_ADDRESS: where other machines reach it; NULL: it takes no node of a
    run on several machines."""
    started_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )
    last_seen_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )


class Finding(Base):
    """One finding of the run doctor (grpo/doctor/): an episode of one rule, rewritten as it
    grows and when it is resolved (app/store/findings.py)."""

    __tablename__ = "finding"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(80))
    """`<rule>@<first step>`: the finding's id in the API and in `diagnosis` events."""
    rule: Mapped[str] = mapped_column(String(40))
    severity: Mapped[str] = mapped_column(String(16))
    """info, warning or critical."""
    status: Mapped[str] = mapped_column(String(16))
    """open or resolved."""
    first_step: Mapped[int] = mapped_column(Integer)
    last_step: Mapped[int] = mapped_column(Integer)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The finding as served (grpo.doctor.Finding.as_dict)."""
    updated_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )

    __table_args__ = (
        UniqueConstraint("run_id", "key", name="uq_finding_run_key"),
        Index("ix_finding_status_run", "status", "run_id"),
    )


class Diagnosis(Base):
    """How far the doctor has read a run: its findings cover steps up to `step`, by the rules
    of `rules_version` (an older version is diagnosed again from the stored steps)."""

    __tablename__ = "diagnosis"

    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), primary_key=True)
    step: Mapped[int] = mapped_column(Integer)
    rules_version: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )
    state: Mapped[str | None] = mapped_column(Text)
    """JSON: the doctor as the API's last stretch of a stored run left it, the step it
    reached and how many steps it read (app/store/findings.py); null when none is kept or
    the steps it read were rewritten since. Text, not JSON: it may hold NaN."""


class Rescore(Base):
    """A replay of a run under other reward entries (grpo/eval/replay.py): what was asked, where it
    stands (queued -> running -> succeeded or failed, on a worker) and, once done, its
    summary; the run itself is never touched."""

    __tablename__ = "rescore"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16), default="queued")
    rewards: Mapped[list[Any]] = mapped_column(JSON)
    """The reward entries it scores with, as in a JobSpec."""
    steps: Mapped[list[Any]] = mapped_column(JSON)
    """The stored steps it re-scores, ascending."""
    submitted_by: Mapped[str | None] = mapped_column(String(200))
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """Counts, flipped groups and the reward and advantage distributions before and after."""
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        UtcDateTime(), default=utcnow, server_default=func.now()
    )
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    dispatched_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    """When its task was last sent; NULL when the send failed (the sweep sends it again)."""

    __table_args__ = (Index("ix_rescore_run", "run_id", "id"),)


class RescoreGroup(Base):
    """One replayed group: its completions' rewards and advantages after (and before), and
    those whose advantage changed sign."""

    __tablename__ = "rescore_group"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    rescore_id: Mapped[int] = mapped_column(ForeignKey("rescore.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    group_index: Mapped[int] = mapped_column(Integer)
    prompt_id: Mapped[str] = mapped_column(String(200))
    completions: Mapped[list[Any]] = mapped_column(JSON)
    """[{rewards, reward, advantage, reward_before, advantage_before}], in order."""
    flips: Mapped[list[Any]] = mapped_column(JSON)
    """[{completion, advantage_before, advantage, change}]: advantages that changed sign."""

    __table_args__ = (
        UniqueConstraint("rescore_id", "step", "group_index", name="uq_rescore_group"),
    )
