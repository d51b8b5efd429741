"""The processes of bench/async.py: a vLLM server (`grpo vllm-serve`) pinned to its cores,
and one run of a spec (bench/async_side.py) pinned to its own, each under `taskset -c`.
Imports nothing heavy: the parent never loads torch.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
KV_CACHE_BYTES = 200_000_000
"""The server's KV cache (vLLM's CPU default, a share of RAM, would not leave room for the
trainer beside it); ample for 32 sequences of a few hundred tokens of builtin:small."""
START_TIMEOUT_S = 900


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`grpo vllm-serve MODEL`, pinned to `cpus` (None: wherever it lands, a GPU's), its
    output in `log`; up once `url`/health answers. Eager fp32 on a 200 MB KV cache unless
    told otherwise (bench/gpu_check.py asks for its precision and a share of the GPU)."""

    def __init__(
        self,
        model: str,
        *,
        cpus: str | None,
        max_model_len: int,
        max_num_seqs: int,
        dtype: str = "float32",
        options: tuple[str, ...] = ("--enforce-eager",),
        serve_args: str = f"--kv-cache-memory-bytes {KV_CACHE_BYTES}",
    ) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = Path(tempfile.mkstemp(prefix="async-bench-server-", suffix=".log")[1])
        pinned = ["taskset", "-c", cpus] if cpus else []
        command = [
            *pinned, sys.executable, "-m", "grpo.cli", "vllm-serve", model,
            "--host", "127.0.0.1", "--port", str(port), "--dtype", dtype, *options,
            "--max-model-len", str(max_model_len), "--max-num-seqs", str(max_num_seqs),
            "--serve-args", serve_args,
        ]  # fmt: skip
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_until_up()

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._is_up():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"vLLM server did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(2)

    def _is_up(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


@dataclass
class RunResult:
    """One run's steps as bench/async_side.py wrote them, and its wall time."""

    steps: list[dict[str, Any]]
    seconds: float

    def steps_per_second(self, warmup: int) -> float:
        """Steps after `warmup` over the wall time from the end of the last warm-up step."""
        timed = self.steps[warmup - 1 :] if warmup else self.steps
        return (len(timed) - 1) / (timed[-1]["at"] - timed[0]["at"])

    def mean(self, key: str, *, first: int = 0, last: int | None = None) -> float:
        """Mean of a scalar over steps [first:] or the last `last` steps."""
        rows = self.steps[-last:] if last else self.steps[first:]
        values = [s[key] for s in rows if key in s]
        return sum(values) / len(values) if values else float("nan")


def run_spec(spec: dict[str, Any], *, cpus: str) -> RunResult:
    """Train `spec` in a fresh process pinned to `cpus`; its steps."""
    with tempfile.TemporaryDirectory(prefix="async-bench-") as tmp:
        folder = Path(tmp)
        (folder / "spec.json").write_text(json.dumps(spec))
        command = [
            "taskset", "-c", cpus, sys.executable, str(BENCH / "async_side.py"),
            "--spec", str(folder / "spec.json"), "--out", str(folder / "out.json"),
            "--workdir", str(folder / "run"),
        ]  # fmt: skip
        started = time.monotonic()
        with (folder / "log").open("wb") as log:
            code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT).returncode
        if code != 0:
            tail = (folder / "log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"run on cpus {cpus} failed ({code}):\n{tail}")
        steps = json.loads((folder / "out.json").read_text())["steps"]
        return RunResult(steps, time.monotonic() - started)
