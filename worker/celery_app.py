"""The Celery application: broker, queues and the settings for long GPU jobs.

Imported by the API to enqueue by task name, so it must not import torch or the training
code (worker.tasks is loaded only in worker processes, through `include`).
"""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_init

from app.settings import Settings, get_settings

TRAIN_TASK = "grpo.train"


def make_celery(settings: Settings) -> Celery:
    app = Celery(
        "grpo", broker=settings.resolved_broker_url, include=["worker.tasks", "worker.lifecycle"]
    )
    app.conf.update(
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=1,
        task_default_queue=settings.default_queue,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # A GRPO run can train for days; Redis must not redeliver it while it is acked late.
        broker_transport_options=_transport_options(settings),
    )
    if settings.is_filesystem_broker:
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
    return {"visibility_timeout": 7 * 24 * 3600}


def prepare_broker() -> None:
    """Create the filesystem broker's folders (the embedded default); a no-op otherwise."""
    settings = get_settings()
    if settings.is_filesystem_broker:
        for folder in ("queue", "processed", "control"):
            (settings.broker_dir / folder).mkdir(parents=True, exist_ok=True)


celery_app = make_celery(get_settings())


@worker_init.connect
def _on_worker_init(**_: object) -> None:
    prepare_broker()


def enqueue_run(run_id: str, *, queue: str) -> None:
    """Send the training task by name; call only after the run's row is committed."""
    prepare_broker()
    celery_app.send_task(TRAIN_TASK, args=[run_id], queue=queue)


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
