"""A worker's life beside its jobs: it beats its running job's heartbeat, reports itself,
requeues runs of dead workers, sends queued runs whose send failed or was lost, and stops
promptly.

Every worker sweeps on start and then periodically; conditional updates let only one
worker requeue a given run. Runs the sweep found are sent to their queue again and resume
from their last checkpoint, or from step 0 if they saved none (the requeue says which). A
worker that found the database unreachable says so once, and once it answers again holds
its stale-run sweep for GRPO_STALE_AFTER_SECONDS: every heartbeat stopped with the
database, and the workers still alive beat again by then, so the sweep requeues only the
runs of workers that died meanwhile.

Stopping (SIGTERM or SIGINT, once or repeated; `docker compose stop`): Celery's warm
shutdown would wait for the whole training task, hours maybe, and a second Ctrl-C would
kill it mid-step, leaving its run `running` for the stale sweep. Instead the first signal
makes the job stop at its next step boundary, checkpoint and hand the run back to the
queue; later signals only say so; and past GRPO_STOP_GRACE_SECONDS the run is handed back
without waiting (its log line says where it starts again: its last checkpoint, or step 0
without one) and the process exits.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time

from celery.signals import worker_ready, worker_shutdown, worker_shutting_down

from app.queue import dispatch_run, redispatch_due, requeue_lost_runs
from app.settings import get_settings
from app.store import db, lease, runs, workers
from app.store.lease import Lease, LeaseLost
from app.store.outage import is_unreachable
from grpo.engines.registry import available_engines
from worker import environment, preload
from worker.db_outage import note_answered, note_unreachable, take_outage
from worker.device import free_memory_mb, held_devices, held_threads

log = logging.getLogger(__name__)
current_run: dict[str, Lease | None] = {"lease": None}
stopping = threading.Event()
"""Set when the worker was told to stop: the running job hands its run back."""
_stopped = threading.Event()
_signalled: list[bool] = []  # _on_shutting_down ran (a plain list: read in signal handlers)
_identity: dict[str, str] = {}
_lost_logged: dict[str, Lease] = {}
_sweep_held_until = [0.0]  # time.monotonic() before which the stale-run sweep waits


def worker_name() -> str:
    return _identity.get("name") or socket.gethostname()


def _report() -> None:
    device = _identity["device"]
    held = current_run["lease"]
    holds = held_devices()
    threads = held_threads()
    db.call(
        workers.report_worker,
        _identity["name"],
        queues=_identity["queues"],
        device=device,
        device_kind=holds.kind,
        devices=list(holds.ids),
        engines=available_engines(),
        free_memory_mb=free_memory_mb(device),
        run_id=held.run_id if held else None,
        threads=threads.threads if threads else None,
        omp_wait_policy=threads.wait_policy if threads else None,
        address=get_settings().worker_address,
    )


def _beat() -> None:
    held = current_run["lease"]
    if held is None:
        return
    try:
        db.call(lease.beat, held)
    except LeaseLost as exc:  # the job stops at its next write; say why here, once
        if current_run["lease"] != held:
            return  # the job let go meanwhile (it ended the run, or handed it back)
        if _lost_logged.get("lease") != held:
            _lost_logged["lease"] = held
            log.warning("run %s: lost it: %s", held.run_id, exc)


def _loop(every_seconds: float) -> None:
    while not _stopped.wait(every_seconds):
        try:
            _beat()
            _report()
            note_answered()
            if not _is_sweep_held():
                db.call(requeue_lost_runs)
            db.call(redispatch_due)
        except Exception as exc:  # noqa: BLE001 - a failed sweep must not kill the worker
            if is_unreachable(exc):
                note_unreachable(exc)  # said once per outage; the next round tries again
            else:
                log.exception("worker housekeeping failed; retrying")


def _is_sweep_held() -> bool:
    """Whether the stale-run sweep waits: for GRPO_STALE_AFTER_SECONDS after this process
    last saw the database come back, since heartbeats stopped while it was away."""
    lasted = take_outage()
    if lasted is not None:
        hold = get_settings().stale_after_seconds
        _sweep_held_until[0] = time.monotonic() + hold
        log.warning(
            "database back after %.1f s: no stale-run sweep for %.0f s, while the running "
            "jobs' heartbeats resume", lasted, hold,
        )  # fmt: skip
    return time.monotonic() < _sweep_held_until[0]


@worker_ready.connect
def _on_ready(sender: object, **_: object) -> None:
    from worker.device import device_label

    _ctrl_c_stops_as_sigterm_does()
    environment.remember()  # what later runs' processes must find (worker/environment.py)
    preload.remember()  # and whether they can be forked with it imported (worker/preload.py)
    consumer = getattr(sender, "controller", None) or sender
    queues = ",".join(sorted(q.name for q in sender.app.amqp.queues.consume_from.values()))  # type: ignore[attr-defined]
    _identity.update(
        name=str(getattr(consumer, "hostname", "worker")), queues=queues, device=device_label()
    )
    _report()
    db.call(requeue_lost_runs)
    db.call(redispatch_due)
    every = min(get_settings().heartbeat_seconds, get_settings().stale_after_seconds / 3)
    threading.Thread(target=_loop, args=(every,), name="worker-housekeeping", daemon=True).start()


def _ctrl_c_stops_as_sigterm_does() -> None:
    """SIGINT gets Celery's SIGTERM handler (a warm shutdown, no escalation). Celery's own
    SIGINT handler installs its cold-shutdown handler before it tells `_on_shutting_down`,
    so a second Ctrl-C landing in between (both reach the whole process group of `grpo up`
    at once) reached the cold shutdown, which the solo pool cannot do: a traceback in the
    log (stop 48's CI)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.getsignal(signal.SIGTERM))


@worker_shutdown.connect
def _on_shutdown(**_: object) -> None:
    _stopped.set()
    preload.stop()
    if "name" in _identity:
        db.call(workers.forget_worker, _identity["name"])


@worker_shutting_down.connect
def _on_shutting_down(**_: object) -> None:
    """Celery's shutdown began (it runs this in its signal handler, on the main thread)."""
    if _signalled:  # set before stopping is, and only here
        return
    _signalled.append(True)  # no lock: a signal may land here and run this again, nested
    for sig in (signal.SIGINT, signal.SIGTERM):  # no escalation to Celery's cold shutdown
        signal.signal(sig, _already_stopping)
    stopping.set()  # takes a lock, so after the handlers that would re-enter it
    grace = get_settings().stop_grace_seconds
    threading.Thread(target=_stop_by, args=(grace,), name="worker-stop", daemon=True).start()
    log.warning("stopping: the running job hands its run back at its next step boundary")


def _already_stopping(*_: object) -> None:
    log.warning("already stopping (within %.0f s)", get_settings().stop_grace_seconds)


def _stop_by(grace: float) -> None:
    """Past the grace, hand the run back without the step in flight, and exit."""
    time.sleep(grace)
    held = current_run["lease"]
    if held is not None:
        try:
            db.call(
                lease.hand_back,
                held,
                reason=f"worker {worker_name()} stopped mid-step after {grace:.0f} s: handed "
                "the run back to the queue",
                say_where=True,
            )
            run = db.call(runs.get_run, held.run_id)
            db.call(
                dispatch_run, held.run_id, queue=run.queue if run else get_settings().default_queue
            )
        except LeaseLost:
            pass
        except Exception:  # noqa: BLE001 - exiting matters more than this write
            log.exception("could not hand run %s back; the stale sweep requeues it", held.run_id)
    if "name" in _identity:
        db.call(workers.forget_worker, _identity["name"])
    log.warning("stopped after %.0f s without reaching a step boundary", grace)
    os._exit(1)
