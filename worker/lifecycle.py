"""A worker's life beside its jobs: it beats its running job's heartbeat, reports itself,
and requeues runs of dead workers.

Every worker sweeps on start and then periodically; the sweep's conditional update lets
only one worker requeue a given run. Runs the sweep found are sent to their queue again
and resume from their last checkpoint.
"""

from __future__ import annotations

import logging
import socket
import threading
from datetime import timedelta

from celery.signals import worker_ready, worker_shutdown

from app.settings import get_settings
from app.store import events, runs, workers
from app.store.models import utcnow
from worker.celery_app import enqueue_run
from worker.device import free_memory_mb

log = logging.getLogger(__name__)
current_run: dict[str, str | None] = {"id": None}
_stopped = threading.Event()
_identity: dict[str, str] = {}


def worker_name() -> str:
    return _identity.get("name") or socket.gethostname()


def sweep_stale_runs() -> None:
    settings = get_settings()
    cutoff = utcnow() - timedelta(seconds=settings.stale_after_seconds)
    requeued, failed = runs.requeue_stale_runs(
        stale_before=cutoff, max_retries=settings.max_retries
    )
    for run in requeued:
        events.add_log(run.id, "warning", run.error or "requeued")
        enqueue_run(run.id, queue=run.queue)
        log.warning("requeued run %s of lost worker %s", run.id, run.worker)
    for run in failed:
        events.add_log(run.id, "error", run.error or "failed")


def _report() -> None:
    device = _identity["device"]
    workers.report_worker(
        _identity["name"],
        queues=_identity["queues"],
        device=device,
        free_memory_mb=free_memory_mb(device),
        run_id=current_run["id"],
    )


def _loop(every_seconds: float) -> None:
    while not _stopped.wait(every_seconds):
        try:
            if current_run["id"]:
                runs.touch_heartbeat(current_run["id"])
            _report()
            sweep_stale_runs()
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
    every = min(get_settings().heartbeat_seconds, get_settings().stale_after_seconds / 3)
    threading.Thread(target=_loop, args=(every,), name="worker-housekeeping", daemon=True).start()


@worker_shutdown.connect
def _on_shutdown(**_: object) -> None:
    _stopped.set()
    if "name" in _identity:
        workers.forget_worker(_identity["name"])
