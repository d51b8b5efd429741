"""What a queued run waits for (run.waiting_for, app/store/waiting.py; issue 42 item 1): the
gang's claims and releases rewrite it (app/store/nodes.py), a worker that leaves the run
queued says why unless a node of its gang is claimed, a change is one status event, and a
claim, a cancel or an end clears it. On PostgreSQL and SQLite, through the store functions
the worker calls."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.store import nodes, runs, waiting, workers
from app.store.models import Event, RunStatus
from grpo.spec import JobSpec
from tests.store_fixture import session, store

__all__ = ["session", "store"]

TTL = 30.0
ONE_MORE = "1 of 2 nodes claimed: waiting for 1 more worker holding 1 device"
NO_ADDRESS = "worker w9 left this run queued: it has no GRPO_WORKER_ADDRESS"


def two_node_run(session: Session) -> str:
    spec = JobSpec(model="builtin:tiny", prompts_per_step=4, resources={"num_nodes": 2})
    return runs.create_run(session, spec, package_version="t")[0].id


def waiting_for(session: Session, run_id: str) -> str | None:
    run = runs.get_run(session, run_id)
    assert run is not None
    return runs.run_summary(run)["waiting_for"]  # type: ignore[no-any-return]


def status_events(session: Session, run_id: str) -> int:
    count = select(func.count()).where(Event.run_id == run_id, Event.kind == "status")
    return int(session.scalar(count) or 0)


def claim(session: Session, run_id: str, worker: str) -> nodes.NodeClaim | None:
    return nodes.claim_node(
        session, run_id, worker=worker, address="10.77.0.11:29500", ttl_seconds=TTL
    )


def test_the_gang_says_what_it_waits_for_and_a_whole_gang_clears_it(session: Session) -> None:
    run_id = two_node_run(session)
    assert waiting_for(session, run_id) is None  # nothing said before a worker took it
    first = claim(session, run_id, "w1")
    assert first is not None
    assert waiting_for(session, run_id) == ONE_MORE
    events = status_events(session, run_id)
    assert claim(session, run_id, "w1") == first  # a redelivered task: nothing changes
    assert status_events(session, run_id) == events

    # a worker's reason does not replace the gang's while a node is claimed
    assert waiting.say_waiting(session, run_id, NO_ADDRESS) is False
    assert waiting_for(session, run_id) == ONE_MORE

    second = claim(session, run_id, "w2")
    assert second is not None
    assert waiting_for(session, run_id) is None  # whole: node 0's worker claims the run next
    assert status_events(session, run_id) == events + 1

    # a node released (a gang given up) says what is missing again; none claimed: the
    # worker's reason is said
    assert nodes.release_node(session, second) is True
    assert waiting_for(session, run_id) == ONE_MORE
    assert nodes.release_node(session, first) is True
    assert waiting_for(session, run_id) == (
        "0 of 2 nodes claimed: waiting for 2 more workers holding 1 device"
    )
    assert waiting.say_waiting(session, run_id, NO_ADDRESS) is True
    assert waiting_for(session, run_id) == NO_ADDRESS
    assert waiting.say_waiting(session, run_id, NO_ADDRESS) is False  # said once


def test_a_claim_or_a_cancel_clears_it_and_a_run_not_queued_keeps_none(session: Session) -> None:
    run_id = two_node_run(session)
    assert claim(session, run_id, "w1") is not None and claim(session, run_id, "w2") is not None
    assert nodes.release_node(session, nodes.NodeClaim.of(nodes.live_nodes(session, run_id)[1]))
    assert waiting_for(session, run_id) == ONE_MORE
    claimed = runs.claim_run(session, run_id, worker="w1", device="cpu")
    assert claimed is not None and claimed.waiting_for is None
    assert waiting_for(session, run_id) is None
    # the run is running: a release of its nodes, or a worker's reason, writes nothing
    assert nodes.release_run(session, run_id) == 1
    assert waiting.say_waiting(session, run_id, NO_ADDRESS) is False
    assert waiting_for(session, run_id) is None

    queued = two_node_run(session)
    assert waiting.say_waiting(session, queued, NO_ADDRESS) is True
    cancelled = runs.request_cancel(session, queued)
    assert cancelled is not None and cancelled.status == RunStatus.CANCELLED
    assert cancelled.waiting_for is None
    resumed = runs.requeue_run(session, queued)
    assert resumed is not None and waiting_for(session, queued) is None


def test_the_workers_that_could_hold_a_node_are_counted(session: Session) -> None:
    def report(name: str, *, address: str | None, devices: int, queues: str = "default",
               role: str = "training") -> None:  # fmt: skip
        workers.report_worker(
            session, name, queues=queues, device="cpu", device_kind="cpu",
            devices=[str(i) for i in range(devices)], free_memory_mb=None, run_id=None,
            role=role, address=address,
        )  # fmt: skip

    assert workers.node_holders(session, queue="default", num_processes=1) == (
        workers.NodeHolders(registered=0, able=0)
    )
    report("a", address="10.0.0.1", devices=2)
    report("b", address="10.0.0.2", devices=1)
    report("c", address=None, devices=4)  # no address: no node
    report("d", address="10.0.0.4", devices=4, queues="h100")  # another queue
    report("g", address="10.0.0.5", devices=4, queues="", role="generation")  # not training
    assert workers.node_holders(session, queue="default", num_processes=1) == (
        workers.NodeHolders(registered=4, able=2)
    )
    assert workers.node_holders(session, queue="default", num_processes=2).able == 1
    assert workers.node_holders(session, queue="h100", num_processes=4).able == 1
    listed = workers.list_workers(session, seen_after=datetime(2000, 1, 1, tzinfo=UTC))
    assert {w.name: w.address for w in listed}["a"] == "10.0.0.1"
