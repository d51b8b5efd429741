"""The training side of a run placed on a generation worker (app/store/generation.py): a
`vllm_mode: server` run submitted with no server address waits, queued, for a generation
worker that serves nothing (`generation_problem`: the training worker declines it until one
is listed); once claimed, the training worker waits for the URL of the server started for
its claim and trains with it as the run's vllm_server_base_url (`with_generation_server`).
No URL within the run's vllm_server_timeout, or a server lost mid-run (`is_server_lost`),
hands the run back to the queue: its next claim gets a new server.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from app.settings import get_settings
from app.store import db, generation, lease
from app.store.lease import Lease
from app.store.models import Run, utcnow
from grpo.engines.vllm_server import lost_words
from grpo.spec import JobSpec

POLL_S = 1.0


class GenerationLost(Exception):  # noqa: N818 - a hand-back, not the run's error
    """No generation server for the claim (none started in time, or it stopped answering):
    the run goes back to the queue. Worded for the run's log."""


class CancelledWaiting(Exception):  # noqa: N818 - a cancel, not an error
    """A cancel was asked for while the run waited for its generation server."""


def generation_problem(queued: Run) -> str | None:
    """Why this worker leaves a run needing a generation worker queued: no generation worker
    serving nothing was heard from lately; None otherwise, and for other runs."""
    if not queued.needs_generation:
        return None
    seen_after = utcnow() - timedelta(seconds=get_settings().stale_after_seconds)
    if db.call(generation.has_free_generation_worker, seen_after=seen_after):
        return None
    return (
        "vllm_mode is server with no server address, and no free generation worker (`grpo "
        "worker --generation`) is listed in GET /api/workers to start its vLLM server"
    )


def with_generation_server(held: Lease, spec: JobSpec, *, stopping: threading.Event) -> JobSpec:
    """The spec with vllm_server_base_url the server a generation worker started for this
    claim, once it answers; GenerationLost past vllm_server_timeout or when the worker is told
    to stop, CancelledWaiting on a cancel."""
    deadline = time.monotonic() + spec.vllm_server_timeout
    while (url := db.call(generation.url_for, held.run_id, held.token)) is None:
        if db.call(lease.check, held):
            raise CancelledWaiting
        if stopping.is_set():
            raise GenerationLost("the worker is stopping before the run's vLLM server started")
        if time.monotonic() > deadline:
            raise GenerationLost(
                f"no generation worker's vLLM server answered within vllm_server_timeout "
                f"({spec.vllm_server_timeout:g} s)"
            )
        time.sleep(POLL_S)
    db.call(lease.add_log, held, "info", f"generating on the vLLM server at {url}, started "
            "for this run by a generation worker")  # fmt: skip
    return spec.model_copy(update={"vllm_server_base_url": url})


def is_server_lost(exc: BaseException, url: str | None) -> bool:
    """Whether a run's failure is the loss of its vLLM server at `url`: it is gone or
    stopped answering (grpo/engines/vllm_server.py's lost_words, which name the URL; the failed
    rank's cause is the innermost exception, a connection error, so its words are what is
    read). A server that answers with a refusal has not been lost: the run fails with it."""
    return url is not None and any(words in str(exc) for words in lost_words(url))
