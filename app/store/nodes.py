"""The gang of a run on several machines in the store (issue 42 item 2, its store part):
each node of a queued run with `resources.num_nodes` > 1 is claimed by one worker, with a
lease of its own that expires unless its heartbeat pushes it on.

A claim takes the lowest node rank that is free: never claimed, released, or whose claim
expired (then the row is taken over and its lease token goes up, so the worker that let
it expire gets `NodeLost` at its next beat). Claims of one run are serialised by a write
to the run's row, as a lease's writes are (app/store/lease.py), on SQLite and PostgreSQL
alike. A gang that does not form in time is freed by its own workers, each releasing its
node when GRPO_GANG_FORMATION_SECONDS pass (worker/gang.py); an expired claim of a worker
that died is taken over by the next claim. `release_expired` frees every expired claim at
once, but no sweep calls it: a node whose claim vanished would read to its gang as one
that left on its own, not as one lost.

Every claim and release also rewrites what the run waits for (run.waiting_for,
app/store/waiting.py) from the claims, in the same transaction: `gang_wait`'s line while
nodes are missing, nothing once the gang is whole. Those writes lock the run's row before
any node's, as a claim does, so a release and a claim of one run cannot deadlock.

Used by the worker's gang (worker/gang.py), which starts the ranks; nothing here does.
Knows nothing of Celery or HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, delete, select, update
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.events import lock_run_events
from app.store.models import NodeState, Run, RunNode, RunStatus, utcnow
from app.store.waiting import set_waiting


@dataclass(frozen=True)
class NodeClaim:
    """What a worker holds for one node: every later write is conditional on it."""

    run_id: str
    node_rank: int
    row_id: int
    token: int

    @classmethod
    def of(cls, node: RunNode) -> NodeClaim:
        return cls(node.run_id, node.node_rank, node.id, node.lease)


class NodeLost(RuntimeError):
    """This worker's claim on a node is void (expired and taken, or released): it must stop
    the node's ranks and write nothing more for it."""


def num_nodes_of(run: Run) -> int:
    resources = run.spec.get("resources") or {}
    return int(resources.get("num_nodes", 1))


@unit
def claim_node(
    session: Session,
    run_id: str,
    *,
    worker: str,
    address: str,
    ttl_seconds: float,
    now: datetime | None = None,
) -> NodeClaim | None:
    """Claim the lowest free node of a queued run for `worker`, reachable at `address`, for
    `ttl_seconds` unless beaten; the worker's own live claim if it holds one already (a
    redelivered task); None when the run is not a queued run of several nodes or every node
    is held by a live claim. A claim rewrites what the run waits for."""
    now = now or utcnow()
    claim = _claim(session, run_id, worker=worker, address=address, expires=now + timedelta(
        seconds=ttl_seconds), now=now)  # fmt: skip
    if claim is not None:
        _rewait(session, run_id, now=now)
    return claim


def _claim(
    session: Session, run_id: str, *, worker: str, address: str, expires: datetime, now: datetime
) -> NodeClaim | None:
    # the write that serialises this run's claims: the row lock (PostgreSQL), the write
    # lock (SQLite); it changes nothing
    touched = session.execute(
        update(Run)
        .where(Run.id == run_id, Run.status == RunStatus.QUEUED)
        .where(Run.is_cancel_requested.is_(False))
        .values(lease=Run.lease)
    )
    if touched.rowcount != 1:  # type: ignore[attr-defined]
        return None
    run = session.execute(select(Run).where(Run.id == run_id)).scalar_one()
    nodes = num_nodes_of(run)
    if nodes < 2:
        return None
    held = {n.node_rank: n for n in _nodes(session, run_id)}
    for node in held.values():
        if node.worker == worker and node.expires_at > now:
            return NodeClaim.of(node)
    for rank in range(nodes):
        taken = held.get(rank)
        if taken is None:
            node = RunNode(
                run_id=run_id, node_rank=rank, worker=worker, address=address,
                state=NodeState.CLAIMED, lease=1, claimed_at=now, heartbeat_at=now,
                expires_at=expires,
            )  # fmt: skip
            session.add(node)
            session.flush()
            return NodeClaim.of(node)
        if taken.expires_at <= now:  # taken over: the last holder's token is void
            taken.worker, taken.address, taken.state = worker, address, NodeState.CLAIMED
            taken.lease += 1
            taken.claimed_at = taken.heartbeat_at = now
            taken.expires_at = expires
            session.flush()
            return NodeClaim.of(taken)
    return None


def _rewait(session: Session, run_id: str, *, now: datetime | None = None) -> None:
    """What the queued run waits for, rewritten from its claims (the caller holds its row)."""
    set_waiting(session, run_id, gang_wait(session, run_id, now=now))


def _nodes(session: Session, run_id: str) -> list[RunNode]:
    stmt = select(RunNode).where(RunNode.run_id == run_id).order_by(RunNode.node_rank)
    return list(session.execute(stmt).scalars())


def _held(claim: NodeClaim, now: datetime) -> ColumnElement[bool]:
    return and_(RunNode.id == claim.row_id, RunNode.lease == claim.token, RunNode.expires_at > now)


@unit
def beat_node(
    session: Session,
    claim: NodeClaim,
    *,
    ttl_seconds: float,
    state: NodeState | None = None,
    now: datetime | None = None,
) -> None:
    """Push the claim's expiry on by `ttl_seconds` (and set its state when given); NodeLost
    when it expired, was taken over or released."""
    now = now or utcnow()
    values: dict[str, object] = {
        "heartbeat_at": now,
        "expires_at": now + timedelta(seconds=ttl_seconds),
    }
    if state is not None:
        values["state"] = state
    result = session.execute(update(RunNode).where(_held(claim, now)).values(**values))
    if result.rowcount != 1:  # type: ignore[attr-defined]
        raise NodeLost(
            f"node {claim.node_rank} of run {claim.run_id}: this worker's claim (lease "
            f"{claim.token}) expired, was taken over or released"
        )


@unit
def release_node(session: Session, claim: NodeClaim) -> bool:
    """Give the node up (the run ended, or this worker stops); False when the claim was no
    longer this worker's, which changes nothing."""
    lock_run_events(session, claim.run_id)
    result = session.execute(
        delete(RunNode).where(RunNode.id == claim.row_id, RunNode.lease == claim.token)
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        return False
    _rewait(session, claim.run_id)
    return True


@unit
def release_expired(session: Session, *, now: datetime | None = None) -> list[tuple[str, int]]:
    """Release every claim past its expiry (the sweep): the (run, node rank)s freed."""
    now = now or utcnow()
    expired = select(RunNode.run_id).where(RunNode.expires_at <= now).distinct()
    run_ids = sorted(session.scalars(expired))
    for run_id in run_ids:  # in one order: two sweeps cannot deadlock
        lock_run_events(session, run_id)
    stmt = delete(RunNode).where(RunNode.expires_at <= now, RunNode.run_id.in_(run_ids))
    freed = session.execute(stmt.returning(RunNode.run_id, RunNode.node_rank))
    released = sorted((str(run_id), int(rank)) for run_id, rank in freed)
    for run_id in run_ids:
        _rewait(session, run_id, now=now)
    return released


@unit
def release_run(session: Session, run_id: str) -> int:
    """Release every node of a run (it ended, or its gang broke up): how many were held."""
    lock_run_events(session, run_id)
    result = session.execute(delete(RunNode).where(RunNode.run_id == run_id))
    _rewait(session, run_id)
    return int(result.rowcount)  # type: ignore[attr-defined]


@unit
def gang_of(session: Session, run_id: str) -> list[RunNode]:
    """Every claim of the run, expired ones too, by node rank."""
    return _nodes(session, run_id)


@unit
def live_nodes(session: Session, run_id: str, *, now: datetime | None = None) -> list[RunNode]:
    """The run's claims that have not expired, by node rank."""
    now = now or utcnow()
    return [n for n in _nodes(session, run_id) if n.expires_at > now]


@unit
def gang_wait(session: Session, run_id: str, *, now: datetime | None = None) -> str | None:
    """What a run of several nodes waits for ("1 of 2 nodes claimed: waiting for 1 more
    worker holding 2 devices"), or None when its gang is whole or it is not such a run."""
    run = session.get(Run, run_id)
    if run is None or (nodes := num_nodes_of(run)) < 2:
        return None
    claimed = len(live_nodes(session, run_id, now=now))
    if claimed >= nodes:
        return None
    missing = nodes - claimed
    devices = int((run.spec.get("resources") or {}).get("num_processes", 1))
    workers = "worker" if missing == 1 else "workers"
    return (
        f"{claimed} of {nodes} nodes claimed: waiting for {missing} more {workers} holding "
        f"{devices} device{'s' if devices > 1 else ''}"
    )
