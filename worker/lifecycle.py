"""A worker's life beside its jobs: it beats its running job's heartbeat, reports itself,
requeues runs of dead workers and sends queued runs whose send failed or was lost.

Every worker sweeps on start and then periodically; conditional updates let only one
worker requeue a given run. Runs the sweep found are sent to their queue again and resume
from their last checkpoint.
"""

from __future__ import annotations

import logging
import socket
import threading
from datetime import timedelta

from celery.signals import worker_ready, worker_shutdown

from app.queue import dispatch_run, redispatch_due
from app.settings import get_settings
from app.store import events, lease, runs, workers
from app.store.lease import Lease, LeaseLost
from app.store.models import utcnow
from worker.device import free_memory_mb

log = logging.getLogger(__name__)
current_run: dict[str, Lease | None] = {"lease": None}
stopping = threading.Event()
"""Set when the worker was told to stop: the running job hands its run back."""
_stopped = threading.Event()
_identity: dict[str, str] = {}


def worker_name() -> str:
    return _identity.get("name") or socket.gethostname()


def sweep_stale_runs(*, worker: str | None = None) -> None:
    """Requeue (or fail) runs whose worker stopped beating, or runs of `worker`, known dead."""
    settings = get_settings()
    cutoff = utcnow() - timedelta(seconds=settings.stale_after_seconds)
    requeued, failed = runs.requeue_stale_runs(
        stale_before=cutoff, max_retries=settings.max_retries, worker=worker
    )
    for run in requeued:
        events.add_log(run.id, "warning", run.error or "requeued")
        dispatch_run(run.id, queue=run.queue)
        log.warning("requeued run %s of lost worker %s", run.id, run.worker)
    for run in failed:
        events.add_log(run.id, "error", run.error or "failed")


def _report() -> None:
    device = _identity["device"]
    held = current_run["lease"]
    workers.report_worker(
        _identity["name"],
        queues=_identity["queues"],
        device=device,
        free_memory_mb=free_memory_mb(device),
        run_id=held.run_id if held else None,
    )


def _beat() -> None:
    held = current_run["lease"]
    if held is None:
        return
    try:
        lease.beat(held)
    except LeaseLost as exc:  # the job stops at its next write; say why here too
        log.warning("run %s: lost it: %s", held.run_id, exc)


def _loop(every_seconds: float) -> None:
    while not _stopped.wait(every_seconds):
        try:
            _beat()
            _report()
            sweep_stale_runs()
            redispatch_due()
        except Exception:  # noqa: BLE001 - a failed sweep must not kill the worker
            log.exception("worker housekeeping failed; retrying")


@worker_ready.connect
def _on_ready(sender: object, **_: object) -> None:
    from worker.device import device_label

    consumer = getattr(sender, "controller", None) or sender
    queues = ",".join(sorted(q.name for q in sender.app.amqp.queues.consume_from.values()))  # type: ignore[attr-defined]
    _identity.update(
        name=str(getattr(consumer, "hostname", "worker")), queues=queues, device=device_label()
    )
    _report()
    sweep_stale_runs()
    redispatch_due()
    every = min(get_settings().heartbeat_seconds, get_settings().stale_after_seconds / 3)
    threading.Thread(target=_loop, args=(every,), name="worker-housekeeping", daemon=True).start()


@worker_shutdown.connect
def _on_shutdown(**_: object) -> None:
    _stopped.set()
    if "name" in _identity:
        workers.forget_worker(_identity["name"])
