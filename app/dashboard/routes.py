"""Dashboard pages: HTML shells that load ES modules from /static.

Every number on a page is fetched by the browser from the public REST API and the SSE
stream, exactly as any other client would; this module only names the views (runs, new
run, run, step, group, prompt, compare) so each has its own URL. Knows nothing of the
store, the queue or the trainer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")
router = APIRouter(include_in_schema=False)


def _page(request: Request, template: str, **context: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, template, context)


@router.get("/", response_class=HTMLResponse)
def runs_page(request: Request) -> HTMLResponse:
    """Runs table; the built-in demo is offered first."""
    return _page(request, "runs.html", nav="runs")


@router.get("/runs/new", response_class=HTMLResponse)
def new_run_page(request: Request) -> HTMLResponse:
    """Spec editor with presets; `?preset=<name>` or `?from=<run id>` preloads it."""
    return _page(request, "new_run.html", nav="new")


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str) -> HTMLResponse:
    """Live curves and distributions; follows the latest step."""
    return _page(request, "run.html", nav="runs", run_id=run_id, step=None)


@router.get("/runs/{run_id}/steps/{step}", response_class=HTMLResponse)
def step_page(request: Request, run_id: str, step: int) -> HTMLResponse:
    """The run page with one step selected for every distribution view."""
    return _page(request, "run.html", nav="runs", run_id=run_id, step=step)


@router.get("/runs/{run_id}/steps/{step}/groups/{index}", response_class=HTMLResponse)
def group_page(request: Request, run_id: str, step: int, index: int) -> HTMLResponse:
    """Group inspector: one prompt's G completions, rewards and advantages."""
    return _page(request, "group.html", nav="runs", run_id=run_id, step=step, index=index)


@router.get("/runs/{run_id}/prompts/{prompt_id:path}", response_class=HTMLResponse)
def prompt_page(request: Request, run_id: str, prompt_id: str) -> HTMLResponse:
    """One prompt's group rewards across steps."""
    return _page(request, "prompt.html", nav="runs", run_id=run_id, prompt_id=prompt_id)


@router.get("/compare", response_class=HTMLResponse)
def compare_page(request: Request) -> HTMLResponse:
    """Two or more runs' curves overlaid; `?runs=<id>,<id>`."""
    return _page(request, "compare.html", nav="compare")
