"""Threads that fit the machine (issue 30, point 1): the demo through the service, alone and
next to one busy process, with the worker of this tree (torch threads from the devices it
holds, OMP_WAIT_POLICY=PASSIVE) and with the worker of an older commit (torch's default
threads and wait policy), side by side in one run.

    .venv/bin/python bench/threads.py [--old 34b88cb] [--steps 100] [--cap 240]

Each setting starts a fresh service (embedded SQLite and filesystem broker, one API
process, one worker, no OMP_NUM_THREADS in its environment as a new user's `make up`),
submits examples/arith-demo.yaml with max_steps STEPS and times it from its first step to
its last as the run's progress reports them (the model's loading is outside). A setting
that has not finished within --cap seconds of its first step is extrapolated from the
steps it made (marked `~`). The busy process is `while True: pass` in Python, started
before the service. The old worker is the same venv running `git archive OLD` of this
repository. Prints one row per setting and the ratios busy/alone for old and new.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import contextmanager
from io import BytesIO
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.stack import free_port, migrate, wait_healthy  # noqa: E402


def code_of(commit: str, into: Path) -> Path:
    """The tree of `commit` in `into` (git archive), to run its worker and API."""
    tar = subprocess.run(
        ["git", "archive", commit], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as archive:
        archive.extractall(into, filter="data")
    return into


@contextmanager
def busy(is_on: bool):  # type: ignore[no-untyped-def]
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if is_on else None
    try:
        yield
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


@contextmanager
def service(code: Path, data_dir: Path):  # type: ignore[no-untyped-def]
    """API and one worker from `code`, as `make up` starts them but without the supervisor."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRPO_", "OMP_", "MKL_"))}
    env.update(GRPO_DATA_DIR=str(data_dir), PYTHONPATH=str(code), PYTHONUNBUFFERED="1")
    if "GRPO_CACHE_DIR" in os.environ:
        env["GRPO_CACHE_DIR"] = os.environ["GRPO_CACHE_DIR"]
    data_dir.mkdir(parents=True)
    migrate(env)
    port = free_port()
    log = open(data_dir / "service.log", "ab")  # noqa: SIM115
    api = [sys.executable, "-m", "uvicorn", "app.main:app", "--port", str(port)]
    worker = [sys.executable, "-m", "worker.cli", "--hostname", "bench@%h"]
    procs = [subprocess.Popen(c, cwd=code, env=env, stdout=log, stderr=log) for c in (api, worker)]
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url)
        yield url
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()
        log.close()


def time_run(url: str, steps: int, cap: float) -> tuple[float, bool]:
    """Seconds from the run's first step to its last (extrapolated past `cap`: True)."""
    spec = yaml.safe_load((ROOT / "examples" / "arith-demo.yaml").read_text())
    spec.update(max_steps=steps, save_steps=0, save_final=False)
    with httpx.Client(base_url=url, timeout=30) as client:
        run = client.post("/api/runs", json=spec).raise_for_status().json()
        first: tuple[float, int] | None = None
        while True:
            got = client.get(f"/api/runs/{run['id']}").raise_for_status().json()
            now = time.monotonic()
            if got["status"] in ("failed", "cancelled"):
                raise RuntimeError(f"run {got['status']}: {got['error']}")
            if first is None and got["step"] >= 1:
                first = (now, got["step"])
            if first is not None and (got["step"] >= steps or now - first[0] > cap):
                done = got["step"] - first[1]
                seconds = (now - first[0]) * (steps - first[1]) / max(done, 1)
                return seconds, got["step"] < steps
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", default="34b88cb", help="commit of the old behaviour")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--cap", type=float, default=240)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    results: dict[tuple[str, bool], float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        trees = {"old": code_of(args.old, Path(tmp) / "old"), "new": ROOT}
        for name, code in trees.items():
            for is_busy in (False, True):
                with busy(is_busy), service(code, Path(tmp) / f"{name}-{is_busy}") as url:
                    seconds, extrapolated = time_run(url, args.steps, args.cap)
                results[name, is_busy] = seconds
                mark = "~" if extrapolated else ""
                where = "next to 1 busy process" if is_busy else "alone"
                row = f"{name:3s} {where:24s} {args.steps} steps {mark}{seconds:7.1f} s"
                print(row, flush=True)
    for name in trees:
        ratio = results[name, True] / results[name, False]
        print(f"{name}: busy/alone {ratio:.1f}x")
    print(f"old/new next to a busy process: {results['old', True] / results['new', True]:.1f}x")


if __name__ == "__main__":
    main()
