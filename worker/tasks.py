"""Celery tasks: thin and idempotent; the message carries only the run (or replay) id."""

from __future__ import annotations

from app.queue import RESCORE_TASK
from worker.celery_app import TRAIN_TASK, celery_app
from worker.job import run_job
from worker.rescore import rescore_job


@celery_app.task(name=TRAIN_TASK, acks_late=True, reject_on_worker_lost=True)
def train(run_id: str) -> None:
    run_job(run_id)


@celery_app.task(name=RESCORE_TASK, acks_late=True, reject_on_worker_lost=True)
def rescore(rescore_id: int) -> None:
    rescore_job(rescore_id)
