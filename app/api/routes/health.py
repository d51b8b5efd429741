"""Health: 200 when the database and the broker answer, 503 otherwise."""

from __future__ import annotations

from importlib.metadata import version

from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from app.api.schemas import Health
from app.queue import is_broker_reachable
from app.store.db import is_database_reachable

router = APIRouter(prefix="/api", tags=["health"])


@router.get("/health", responses={503: {"model": Health, "description": "Degraded"}})
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
