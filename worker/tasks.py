"""Celery tasks: thin and idempotent; the message carries only the run id."""

from __future__ import annotations

from worker.celery_app import TRAIN_TASK, celery_app
from worker.job import run_job


@celery_app.task(name=TRAIN_TASK, acks_late=True, reject_on_worker_lost=True)
def train(run_id: str) -> None:
    run_job(run_id)
