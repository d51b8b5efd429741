"""Creates the FastAPI app and includes the routers; nothing else."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from app.api.errors import install_error_handlers
from app.api.guards import RequestGuard
from app.api.limits import BodySizeLimit, BodyTimeout
from app.api.outages import install_outage_handlers
from app.api.responses import EVERY_ROUTE, errors
from app.api.routes import (
    checkpoints,
    datasets,
    doctor,
    evals,
    exports,
    health,
    openapi,
    presets,
    rescores,
    rewards,
    run_actions,
    run_summary,
    runs,
    specs,
    steps,
    stream,
    workers,
)
from app.dashboard import routes as dashboard
from app.settings import get_settings

STATIC_DIR = Path(__file__).parent / "static"


def create_app() -> FastAPI:
    # the document and its pages are routes of app/api/routes/openapi.py, under the read rule
    app = FastAPI(
        title="GRPO Service", version="0.1.0", openapi_url=None, docs_url=None, redoc_url=None
    )
    install_error_handlers(app)
    install_outage_handlers(app)
    settings = get_settings()
    app.add_middleware(
        BodySizeLimit, max_bytes=settings.max_body_bytes, exempt_prefixes=("/api/datasets",)
    )
    app.add_middleware(
        BodyTimeout,
        seconds=settings.body_timeout_seconds,
        min_rate=settings.body_min_bytes_per_second,
    )
    app.add_middleware(RequestGuard, settings=settings)  # outermost: runs first
    for module in (
        health,
        presets,
        runs,
        run_actions,
        steps,
        stream,
        exports,
        datasets,
        workers,
        checkpoints,
        evals,
        run_summary,
        doctor,
        specs,
        rescores,
        rewards,
    ):
        app.include_router(module.router, responses=errors(*EVERY_ROUTE))
    app.include_router(openapi.router)
    app.include_router(dashboard.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app


app = create_app()
