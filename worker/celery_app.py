"""The worker's Celery application: app/queue.py's, with the worker's task modules.

worker.tasks and worker.lifecycle are loaded only in worker processes, through `include`.
"""

from __future__ import annotations

from celery.signals import worker_init

from app.queue import TRAIN_TASK, celery_app, prepare_broker

celery_app.conf.include = ["worker.tasks", "worker.lifecycle"]

__all__ = ["TRAIN_TASK", "celery_app"]


@worker_init.connect
def _on_worker_init(**_: object) -> None:
    prepare_broker()
