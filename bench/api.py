"""API and store benchmark, on PostgreSQL and on the embedded SQLite store, side by side.

    python bench/api.py            (PostgreSQL on 127.0.0.1:5432 and Redis on :6379)

Measures, for each store: submit requests per second (concurrent clients against a real
uvicorn server, runs parked on a queue no worker consumes), the latency of
GET /api/runs/{id}/metrics for a 10,000-step run, and the time to write one step of
64 groups x 16 completions through app.store.steps.save_step. The last line reports the
PostgreSQL figures: `api: submits/s=<n> metrics_10k_ms=<n> step_write_ms=<n>`.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.stack import REDIS_URL, create_pg_database, drop_pg_database, running_stack  # noqa: E402

SUBMITS, CLIENTS, STEPS = 1000, 8, 10_000
API_WORKERS = 2  # uvicorn processes, one per core, as a 2-core production host would run
SPEC = {"model": "builtin:tiny", "max_steps": 10, "resources": {"queue": "bench-parked"}}


def measure_submits(url: str) -> float:
    """wrk (C, Debian package `wrk`) when present: a Python load generator on the same 2
    cores would measure itself as much as the server."""
    if shutil.which("wrk"):
        return wrk_submits(url)
    return httpx_submits(url)


def wrk_submits(url: str, seconds: int = 10) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        body = json.dumps(SPEC).replace("'", "\\'")
        script.write(f"wrk.method = 'POST'\nwrk.body = '{body}'\n")
        script.write("wrk.headers['Content-Type'] = 'application/json'\n")
    args = ["wrk", "-t1", f"-c{CLIENTS}", f"-d{seconds}s", "-s", script.name, f"{url}/api/runs"]
    subprocess.run([*args[:3], "-d2s", *args[4:]], capture_output=True, check=True)  # warm-up
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    os.unlink(script.name)
    if "Non-2xx" in out:
        raise RuntimeError(f"some submits failed:\n{out}")
    return float(out.split("Requests/sec:")[1].split()[0])


def httpx_submits(url: str) -> float:
    def submit_many(n: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            for _ in range(n):
                assert client.post("/api/runs", json=SPEC).status_code == 201

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(submit_many, [20] * CLIENTS))  # warm-up
        start = time.perf_counter()
        list(pool.map(submit_many, [SUBMITS // CLIENTS] * CLIENTS))
        return SUBMITS / (time.perf_counter() - start)


def store_side(env: dict[str, str]) -> dict[str, float]:
    """Fill a 10k-step run and time one big step write, in a fresh process on the stack's DB."""
    out = subprocess.run(
        [sys.executable, str(Path(__file__).parent / "store_writes.py"), str(STEPS)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"store_writes.py failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_metrics(url: str, run_id: str) -> float:
    with httpx.Client(base_url=url, timeout=60) as client:
        timings = []
        for _ in range(7):
            start = time.perf_counter()
            response = client.get(f"/api/runs/{run_id}/metrics")
            timings.append((time.perf_counter() - start) * 1000)
            assert len(response.json()["items"]) == STEPS
    return statistics.median(timings)


def bench_store(name: str, data_dir: Path, **urls: str) -> dict[str, float]:
    with running_stack(data_dir, with_worker=False, api_workers=API_WORKERS, **urls) as stack:
        submits = measure_submits(stack.url)
        env = {**stack.env, "GRPO_BROKER_URL": stack.env.get("GRPO_BROKER_URL", "filesystem://")}
        writes = store_side(env)
        metrics_ms = measure_metrics(stack.url, writes.pop("run_id"))  # type: ignore[arg-type]
    result = {"submits_per_s": submits, "metrics_10k_ms": metrics_ms, **writes}
    print(
        f"{name:<10} submits/s={submits:7.0f}  metrics_10k_ms={metrics_ms:7.1f}  "
        f"step_write_ms={writes['step_write_ms']:6.1f}",
        flush=True,
    )
    return result


def main() -> None:
    print(
        f"{os.cpu_count()} CPUs; uvicorn with {API_WORKERS} workers; submits by {CLIENTS} "
        f"connections ({'wrk' if shutil.which('wrk') else 'httpx threads'}); "
        f"metrics of a {STEPS}-step run; one step = 64 groups x 16 completions",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        bench_store("embedded", Path(tmp) / "embedded")
        pg_url = create_pg_database()
        try:
            pg = bench_store(
                "postgres", Path(tmp) / "pg", database_url=pg_url, broker_url=REDIS_URL
            )
        finally:
            drop_pg_database(pg_url)
    print(
        f"api: submits/s={pg['submits_per_s']:.0f} metrics_10k_ms={pg['metrics_10k_ms']:.0f} "
        f"step_write_ms={pg['step_write_ms']:.1f}"
    )


if __name__ == "__main__":
    main()
