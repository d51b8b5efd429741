"""Response bodies of the API (request bodies are grpo.spec.JobSpec)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

RunStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class RunOut(BaseModel):
    id: str
    name: str
    status: RunStatus
    spec: dict[str, Any]
    package_version: str
    step: int
    total_steps: int
    last_metrics: dict[str, float] | None
    error: str | None
    worker: str | None
    device: str | None
    attempts: int
    is_cancel_requested: bool
    created_at: str
    started_at: str | None
    finished_at: str | None
    heartbeat_at: str | None


class RunList(BaseModel):
    items: list[RunOut]
    next_cursor: str | None


class MetricRow(BaseModel):
    step: int
    metrics: dict[str, float]


class MetricList(BaseModel):
    items: list[MetricRow]


class LogRow(BaseModel):
    level: str
    message: str
    created_at: str


class LogList(BaseModel):
    items: list[LogRow]


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    database: bool
    broker: bool
    version: str


class Preset(BaseModel):
    name: str
    title: str
    description: str
    spec: dict[str, Any]


class PresetList(BaseModel):
    items: list[Preset]
