"""`grpo up`, the embedded default, as a user runs it: starts, trains a run, stops on Ctrl-C."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import psutil

from tests.integration.test_run_lifecycle import wait_for_final
from tests.stack import free_port, grpo_up


def test_grpo_up_serves_trains_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    with grpo_up(tmp_path, port=port) as (proc, url):
        assert (tmp_path / "data" / "grpo.db").exists()
        with httpx.Client(base_url=url, timeout=30) as client:
            assert 'id="demo"' in client.get("/").text  # the first screen offers the demo
            spec = {
                "model": "builtin:tiny",
                "max_steps": 2,
                "prompts_per_step": 2,
                "num_generations": 4,
                "max_completion_length": 6,
            }
            run_id = client.post("/api/runs", json=spec).json()["id"]
            assert wait_for_final(client, run_id)["status"] == "succeeded"
        children = psutil.Process(proc.pid).children(recursive=True)
        assert len(children) >= 2  # the API and the worker
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    output = (tmp_path / f"up-{port}.log").read_text()
    assert proc.returncode == 0, output
    assert f"http://127.0.0.1:{port}" in output
    time.sleep(0.5)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
