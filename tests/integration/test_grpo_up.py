"""`grpo up`, the embedded default, as a user runs it: starts, trains a run, stops on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

from tests.integration.test_run_lifecycle import wait_for_final
from tests.stack import free_port, wait_healthy


def test_grpo_up_serves_trains_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    if "GRPO_CACHE_DIR" in os.environ:
        env["GRPO_CACHE_DIR"] = os.environ["GRPO_CACHE_DIR"]
    env.update(GRPO_DATA_DIR=str(tmp_path / "data"), GRPO_PORT=str(port), PYTHONUNBUFFERED="1")
    grpo = Path(sys.executable).parent / "grpo"
    proc = subprocess.Popen(
        [str(grpo), "up"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, timeout=90)
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
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output
    assert f"http://127.0.0.1:{port}" in output
    time.sleep(0.5)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
