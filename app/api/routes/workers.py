"""Live workers: what they listen to, what they run, the devices they hold."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter

from app.api.deps import ReadAccess, SessionDep, SettingsDep
from app.api.schemas import ServingOut, WorkerList, WorkerOut
from app.store import workers
from app.store.models import utcnow

router = APIRouter(prefix="/api", tags=["workers"], dependencies=[ReadAccess])


@router.get("/workers")
def list_workers(settings: SettingsDep, session: SessionDep) -> WorkerList:
    """Workers heard from within the stale-after window."""
    seen_after = utcnow() - timedelta(seconds=settings.stale_after_seconds)
    return WorkerList(
        items=[
            WorkerOut(
                name=w.name,
                queues=[q for q in w.queues.split(",") if q],
                device=w.device,
                device_kind="cuda" if w.device_kind == "cuda" else "cpu",
                devices=[str(d) for d in w.devices],
                engines=[str(e) for e in (w.engines or ["native"])],
                free_memory_mb=w.free_memory_mb,
                threads=w.threads,
                omp_wait_policy=w.omp_wait_policy,
                run_id=w.run_id,
                role="generation" if w.role == "generation" else "training",
                serving=ServingOut.model_validate(w.serving) if w.serving else None,
                address=w.address,
                started_at=w.started_at.isoformat(),
                last_seen_at=w.last_seen_at.isoformat(),
            )
            for w in workers.list_workers(session, seen_after=seen_after)
        ]
    )
