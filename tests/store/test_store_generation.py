"""Generation servers of runs in the store (issue 41 item 2, app/store/generation.py): a
`vllm_mode: server` run submitted with no server address needs a generation worker; one
generation worker takes each claim of it, publishes its server's URL for that claim only,
and sees the claim end (a hand-back, a finish); a new claim of the run is free to take
again. Free generation workers are those serving nothing. On PostgreSQL and SQLite."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from app.store import generation, lease, runs, workers
from app.store.lease import Lease
from app.store.models import RunStatus, utcnow
from grpo.spec import JobSpec
from tests.store_fixture import session, store

__all__ = ["session", "store"]

PLACED = {"model": "builtin:small", "use_vllm": True, "vllm_mode": "server"}


def new_run(session: Session, **fields: object) -> str:
    run, _ = runs.create_run(session, JobSpec.model_validate(fields), package_version="t")
    return run.id


def claim(session: Session, run_id: str) -> Lease:
    run = runs.claim_run(session, run_id, worker="trainer", device="cpu")
    assert run is not None
    return Lease.of(run)


def test_only_a_server_mode_run_without_an_address_needs_a_generation_worker(
    session: Session,
) -> None:
    placed = new_run(session, **PLACED)
    given = new_run(session, **PLACED, vllm_server_base_url="http://127.0.0.1:8011")
    host_only = new_run(session, **PLACED, vllm_server_port=8011)
    colocated = new_run(session, model="builtin:small", use_vllm=True)
    needs = {
        r: runs.get_run(session, r).needs_generation for r in (placed, given, host_only, colocated)
    }  # type: ignore[union-attr]
    assert needs == {placed: True, given: False, host_only: False, colocated: False}


def test_each_claim_gets_a_server_of_its_own_and_sees_its_end(session: Session) -> None:
    run_id = new_run(session, **PLACED)
    assert generation.take_run(session, "gen-1") is None  # queued: nothing to serve yet
    held = claim(session, run_id)
    taken = generation.take_run(session, "gen-1")
    assert taken is not None and (taken.run_id, taken.lease) == (run_id, held.token)
    assert taken.spec["vllm_mode"] == "server"
    assert generation.take_run(session, "gen-2") is None  # one server per claim
    assert generation.url_for(session, run_id, held.token) is None  # not answering yet
    assert generation.publish_url(session, "gen-1", taken, "http://127.0.0.1:9001")
    assert not generation.publish_url(session, "gen-2", taken, "http://127.0.0.1:9002")
    assert generation.url_for(session, run_id, held.token) == "http://127.0.0.1:9001"
    assert generation.is_serving(session, "gen-1", taken)
    lease.hand_back(session, held, reason="test")  # the claim is over
    assert not generation.is_serving(session, "gen-1", taken)
    assert not generation.publish_url(session, "gen-1", taken, "http://127.0.0.1:9001")
    generation.release(session, "gen-1", taken)
    again = claim(session, run_id)  # the next claim: a new server, maybe elsewhere
    assert generation.url_for(session, run_id, again.token) is None
    retaken = generation.take_run(session, "gen-2")
    assert retaken is not None and retaken.lease == again.token
    lease.finish(session, again, status=RunStatus.CANCELLED)
    assert not generation.is_serving(session, "gen-2", retaken)


def test_a_free_generation_worker_is_one_serving_nothing(session: Session) -> None:
    seen_after = utcnow() - timedelta(seconds=60)
    assert not generation.has_free_generation_worker(session, seen_after=seen_after)
    report = {"queues": "q", "device": "cpu", "device_kind": "cpu", "devices": ["0"],
              "free_memory_mb": None}  # fmt: skip
    workers.report_worker(session, "trainer", **report, run_id=None)  # type: ignore[arg-type]
    assert not generation.has_free_generation_worker(session, seen_after=seen_after)
    serving = {"run_id": "r1", "model": "builtin:small", "url": "http://127.0.0.1:9001"}
    workers.report_worker(session, "gen", **report, run_id="r1", role="generation",
                          serving=serving)  # type: ignore[arg-type]  # fmt: skip
    assert not generation.has_free_generation_worker(session, seen_after=seen_after)
    workers.report_worker(session, "gen", **report, run_id=None, role="generation")  # type: ignore[arg-type]
    assert generation.has_free_generation_worker(session, seen_after=seen_after)
    later = utcnow() + timedelta(seconds=1)
    assert not generation.has_free_generation_worker(session, seen_after=later)
