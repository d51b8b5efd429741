"""A run's gang of nodes in the store (issue 42 item 2, app/store/nodes.py): each node of a
queued run of several nodes is claimed by one worker with a lease of its own; a claim that
is not beaten expires, is taken over (the old holder's token void) or released by the
sweep; on PostgreSQL and SQLite, concurrent claims never give one node to two workers."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session

from app.store import db, nodes, runs
from app.store.models import NodeState, RunStatus, utcnow
from app.store.nodes import NodeLost
from grpo.spec import JobSpec
from tests.store_fixture import session, store

__all__ = ["session", "store"]

TTL = 30.0


def new_run(session: Session, num_nodes: int = 2, num_processes: int = 1) -> str:
    resources = {"num_nodes": num_nodes, "num_processes": num_processes}
    spec = JobSpec(model="builtin:tiny", prompts_per_step=4, resources=resources)
    run, _ = runs.create_run(session, spec, package_version="t")
    return run.id


def claim(session: Session, run_id: str, worker: str, **kwargs: object) -> nodes.NodeClaim | None:
    address = f"10.77.0.{11 + int(worker[-1])}"
    return nodes.claim_node(
        session, run_id, worker=worker, address=address, ttl_seconds=TTL, **kwargs
    )  # type: ignore[arg-type]


def test_each_node_goes_to_one_worker_and_the_run_says_what_it_waits_for(
    session: Session,
) -> None:
    run_id = new_run(session, num_processes=2)
    assert nodes.gang_wait(session, run_id) == (
        "0 of 2 nodes claimed: waiting for 2 more workers holding 2 devices"
    )
    first = claim(session, run_id, "w1")
    assert first is not None and first.node_rank == 0
    assert claim(session, run_id, "w1") == first  # a redelivered task: its own claim again
    assert nodes.gang_wait(session, run_id) == (
        "1 of 2 nodes claimed: waiting for 1 more worker holding 2 devices"
    )
    second = claim(session, run_id, "w2")
    assert second is not None and second.node_rank == 1
    assert claim(session, run_id, "w3") is None  # the gang is whole
    assert nodes.gang_wait(session, run_id) is None
    gang = nodes.live_nodes(session, run_id)
    assert [(n.node_rank, n.worker, n.address, n.state) for n in gang] == [
        (0, "w1", "10.77.0.12", NodeState.CLAIMED),
        (1, "w2", "10.77.0.13", NodeState.CLAIMED),
    ]
    nodes.beat_node(session, first, ttl_seconds=TTL, state=NodeState.RUNNING)
    assert nodes.live_nodes(session, run_id)[0].state == NodeState.RUNNING

    # a released node is free again; releasing a claim twice changes nothing
    assert nodes.release_node(session, second) is True
    assert nodes.release_node(session, second) is False
    with pytest.raises(NodeLost):
        nodes.beat_node(session, second, ttl_seconds=TTL)
    third = claim(session, run_id, "w3")
    assert third is not None and third.node_rank == 1
    assert nodes.release_run(session, run_id) == 2
    assert nodes.live_nodes(session, run_id) == []


def test_only_queued_runs_of_several_nodes_are_claimed(session: Session) -> None:
    assert claim(session, new_run(session, num_nodes=1), "w1") is None
    assert claim(session, "no-such-run", "w1") is None
    run_id = new_run(session)
    assert runs.claim_run(session, run_id, worker="w0", device="cpu") is not None
    assert claim(session, run_id, "w1") is None  # running: its gang is formed
    cancelled = new_run(session)
    assert claim(session, cancelled, "w1") is not None
    runs.finish_run(session, cancelled, status=RunStatus.CANCELLED)
    assert claim(session, cancelled, "w2") is None
    assert runs.delete_run(session, cancelled)  # its node rows go with it
    assert nodes.live_nodes(session, cancelled) == []


def test_an_expired_claim_is_taken_over_and_its_holder_loses_it(session: Session) -> None:
    run_id = new_run(session)
    now = utcnow()
    old = claim(session, run_id, "w1", now=now)
    assert old is not None
    later = now + timedelta(seconds=TTL + 1)
    assert [n.node_rank for n in nodes.live_nodes(session, run_id, now=later)] == []
    new = claim(session, run_id, "w2", now=later)
    assert new is not None and (new.node_rank, new.row_id) == (0, old.row_id)
    assert new.token == old.token + 1
    with pytest.raises(NodeLost, match="node 0 of run .*expired, was taken over or released"):
        nodes.beat_node(session, old, ttl_seconds=TTL, now=later)
    assert nodes.release_node(session, old) is False  # the new holder keeps it
    nodes.beat_node(session, new, ttl_seconds=TTL, now=later)


def test_a_beat_keeps_a_claim_and_the_sweep_releases_those_not_beaten(session: Session) -> None:
    waiting, other = new_run(session), new_run(session)
    now = utcnow()
    kept = claim(session, waiting, "w1", now=now)
    dropped = claim(session, other, "w2", now=now)
    assert kept is not None and dropped is not None
    nodes.beat_node(session, kept, ttl_seconds=TTL, now=now + timedelta(seconds=TTL - 1))
    sweep = now + timedelta(seconds=TTL + 1)
    assert nodes.release_expired(session, now=sweep) == [(other, 0)]
    assert [n.worker for n in nodes.live_nodes(session, waiting, now=sweep)] == ["w1"]
    with pytest.raises(NodeLost):
        nodes.beat_node(session, dropped, ttl_seconds=TTL, now=sweep)
    # an expired claim that is not taken over cannot come back with a late beat
    late = now + timedelta(seconds=3 * TTL)
    with pytest.raises(NodeLost):
        nodes.beat_node(session, kept, ttl_seconds=TTL, now=late)


def test_concurrent_claims_give_each_node_to_one_worker(session: Session) -> None:
    run_id = new_run(session, num_nodes=3)
    barrier = threading.Barrier(6)
    got: list[tuple[str, int | None]] = []

    def take(worker: str) -> None:
        barrier.wait()
        held = db.call(
            nodes.claim_node, run_id, worker=worker, address="10.77.0.1", ttl_seconds=TTL
        )
        got.append((worker, None if held is None else held.node_rank))

    threads = [threading.Thread(target=take, args=(f"w{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ranks = sorted(rank for _, rank in got if rank is not None)
    assert ranks == [0, 1, 2] and len(got) == 6
    holders = {n.worker for n in nodes.live_nodes(session, run_id)}
    assert holders == {worker for worker, rank in got if rank is not None}
