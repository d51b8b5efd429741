"""Health: 200 when the database and the broker answer, 503 otherwise."""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter, Response
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool

from app.api.schemas import Health
from app.store.db import get_engine
from worker.celery_app import is_broker_reachable

router = APIRouter(prefix="/api", tags=["health"])


def is_database_reachable() -> bool:
    try:
        with get_engine().connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception:  # noqa: BLE001 - any failure means "not reachable" to a health check
        return False


@router.get("/health")
async def health(response: Response) -> Health:
    database = await run_in_threadpool(is_database_reachable)
    broker = await run_in_threadpool(is_broker_reachable)
    if not (database and broker):
        response.status_code = 503
    return Health(
        status="ok" if database and broker else "degraded",
        database=database,
        broker=broker,
        version=version("grpo-service"),
    )
