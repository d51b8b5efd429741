"""The queue client: the Celery app's broker settings, sending a run, and broker health.

Both the API and the worker use it (the worker adds its tasks to this Celery app), so the
API never imports the worker. It must not import torch or the training code. A send
follows the commit of the run's row; when it fails the run is marked unsent and the
worker's housekeeping sweep sends it later (`redispatch_due`): a broker outage costs a
delay, never a run.
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta

from celery import Celery

from app import file_broker
from app.settings import Settings, get_settings
from app.store import dispatch, events, rescores, runs
from app.store.db import Session
from app.store.models import Run, utcnow
from app.store.nodes import num_nodes_of

TRAIN_TASK = "grpo.train"
RESCORE_TASK = "grpo.rescore"
log = logging.getLogger(__name__)


def make_celery(settings: Settings) -> Celery:
    app = Celery("grpo", broker=settings.resolved_broker_url)
    app.conf.update(
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=1,
        task_default_queue=settings.default_queue,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # A send to a broker that is down fails fast; the sweep sends the run again later.
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.2},
        broker_connection_timeout=2,
        # A GRPO run can train for days; Redis must not redeliver it while it is acked late.
        broker_transport_options=_transport_options(settings),
    )
    if settings.is_filesystem_broker:
        # kombu's filesystem transport, writing each message whole (app/file_broker.py)
        app.conf.broker_transport = file_broker.TRANSPORT
        # The filesystem transport has no fanout: no remote control, mingle or gossip.
        app.conf.worker_enable_remote_control = False
    return app


def _transport_options(settings: Settings) -> dict[str, object]:
    if settings.is_filesystem_broker:
        return {
            "data_folder_in": str(settings.broker_dir / "queue"),
            "data_folder_out": str(settings.broker_dir / "queue"),
            "processed_folder": str(settings.broker_dir / "processed"),
            "control_folder": str(settings.broker_dir / "control"),
            "store_processed": False,
            "polling_interval": 0.5,
        }
    return {"visibility_timeout": 7 * 24 * 3600, "socket_connect_timeout": 2}


def prepare_broker() -> None:
    """Create the filesystem broker's folders (the embedded default); a no-op otherwise."""
    settings = get_settings()
    if settings.is_filesystem_broker:
        for folder in ("queue", "processed", "control"):
            (settings.broker_dir / folder).mkdir(parents=True, exist_ok=True)


celery_app = make_celery(get_settings())


def send_run(run_id: str, *, queue: str) -> None:
    """Send the training task by name; raises when the broker cannot take it."""
    prepare_broker()
    celery_app.send_task(TRAIN_TASK, args=[run_id], queue=queue)


def send_rescore(rescore_id: int, *, queue: str) -> None:
    """Send a replay (app/store/rescores.py) to the run's queue; raises when the broker
    cannot take it."""
    prepare_broker()
    celery_app.send_task(RESCORE_TASK, args=[rescore_id], queue=queue)


def dispatch_rescore(session: Session, rescore_id: int, *, queue: str) -> bool:
    """Send a committed queued replay; on failure mark it unsent for the sweep."""
    try:
        send_rescore(rescore_id, queue=queue)
        return True
    except Exception as exc:  # noqa: BLE001 - any failed send is retried by the sweep
        log.warning("replay %s not sent to queue %s (%s); the sweep sends it later", rescore_id,
                    queue, exc)  # fmt: skip
        rescores.mark_rescore_undispatched(session, rescore_id)
        return False


def dispatch_run(session: Session, run_id: str, *, queue: str) -> bool:
    """Send a committed queued run, once per node of a run on several machines (so that as
    many workers each take one: worker/gang.py); on failure mark it unsent for the sweep.
    True when sent."""
    try:
        run = session.get(Run, run_id)
        for _ in range(num_nodes_of(run) if run is not None else 1):
            send_run(run_id, queue=queue)
        return True
    except Exception as exc:  # noqa: BLE001 - any failed send is retried by the sweep
        log.warning(
            "run %s not sent to queue %s (%s); the sweep sends it later", run_id, queue, exc
        )
        dispatch.mark_undispatched(session, run_id)
        return False


def redispatch_due(session: Session) -> list[str]:
    """Send again the queued runs (and replays: app/store/rescores.py) never sent, or
    unclaimed since `redispatch_after_seconds`; the runs sent."""
    cutoff = utcnow() - timedelta(seconds=get_settings().redispatch_after_seconds)
    sent = []
    for run in dispatch.take_due(session, sent_before=cutoff):
        if dispatch_run(session, run.id, queue=run.queue):
            sent.append(run.id)
    for rescore_id, queue in rescores.take_due_rescores(session, sent_before=cutoff):
        dispatch_rescore(session, rescore_id, queue=queue)
    return sent


def requeue_lost_runs(session: Session, *, worker: str | None = None) -> None:
    """Requeue and send (or, past the retry limit, fail) runs whose worker stopped beating,
    or every running run of `worker` when it is known to be dead (`grpo up` saw it exit)."""
    settings = get_settings()
    cutoff = utcnow() - timedelta(seconds=settings.stale_after_seconds)
    requeued, failed = runs.requeue_stale_runs(
        session, stale_before=cutoff, max_retries=settings.max_retries, worker=worker
    )
    for run in requeued:
        events.add_log(session, run.id, "warning", run.error or "requeued")
        dispatch_run(session, run.id, queue=run.queue)
        log.warning("requeued run %s of lost worker %s", run.id, run.worker)
    for run in failed:
        events.add_log(session, run.id, "error", run.error or "failed")


def is_broker_reachable() -> bool:
    settings = get_settings()
    if settings.is_filesystem_broker:
        try:
            prepare_broker()
        except OSError:
            return False
        return os.access(settings.broker_dir / "queue", os.W_OK)
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not reachable" to a health check
        return False
