"""What the first reads of a long run cost the API: GET /metrics and GET /diagnostics of a
seeded N-step run (default 100,000), on the embedded SQLite store or PostgreSQL.

    python bench/long_run.py                      SQLite, 100,000 steps
    python bench/long_run.py --steps 20000 --store postgres

A fresh service (one API process, no worker) gets a finished run of N steps seeded straight
into its store by `tests.seed` (the rows a worker writes, no findings: a run trained before
the doctor, or whose doctor failed, or diagnosed by older rules). Each request is then timed
from the client, and the API process's memory measured around it: its peak RSS (VmHWM,
reset through /proc/PID/clear_refs just before) minus its RSS just before. Reported per
request: wall ms, body bytes, rows (`items`), peak RSS growth in MiB.

Requests, in order: the run page's first read of the metrics (`/metrics` as the dashboard
asks: its `max_points`), the same again (the body cache), a plain `/metrics` (a client that
asks for no bound), the first `/diagnostics`, a second, reads every POLL_S until the answer is
current (a long run's diagnosis goes on after the answer, app/store/findings.py), and one more.
The same script runs against an older tree (copy it there): its /metrics answers every step
whatever the parameters, its first /diagnostics diagnoses the whole run.
The last line: `long_run: steps=N metrics_ms=… metrics_bytes=… metrics_mib=… diagnostics_ms=…
diagnostics_mib=… caught_up_s=… caught_up_cpu_s=…` (caught_up: from the second read until
the findings cover every step; the API process's CPU seconds meanwhile, polls included).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.stack import (  # noqa: E402
    REDIS_URL,
    create_pg_database,
    drop_pg_database,
    running_stack,
)

DASHBOARD_POINTS = 1000
"""What the run page asks for (app/static/js/sampling.js MAX_POINTS)."""
CATCH_UP_TIMEOUT_S = 600
POLL_S = 2.0
"""Reads while the diagnosis catches up: each costs the API a little (the findings so far)."""


def reset_peak(proc: psutil.Process) -> int:
    """Reset the process's peak RSS to its current RSS (Linux); returns that RSS in bytes."""
    Path(f"/proc/{proc.pid}/clear_refs").write_text("5")
    return int(proc.memory_info().rss)


def peak(proc: psutil.Process) -> int:
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def measure(client: httpx.Client, api: psutil.Process, path: str, **params: Any) -> dict[str, Any]:
    before = reset_peak(api)
    started = time.perf_counter()
    response = client.get(path, params=params)
    ms = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    body = response.json()
    return {
        "ms": ms,
        "bytes": len(response.content),
        "rows": len(body.get("items", [])),
        "mib": (peak(api) - before) / 2**20,
        "body": body,
    }


def show(name: str, m: dict[str, Any]) -> None:
    print(
        f"  {name:<34} {m['ms']:9.1f} ms {m['bytes']:>12,} B {m['rows']:>8,} rows "
        f"{m['mib']:8.1f} MiB peak RSS growth",
        flush=True,
    )


def seed(env: dict[str, str], steps: int) -> str:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "tests.seed", str(steps)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    print(f"  seeded {steps:,} steps in {time.perf_counter() - started:.0f} s", flush=True)
    return out.stdout.strip().splitlines()[-1]


def bench(store: str, steps: int, data_dir: Path, **urls: str) -> dict[str, float]:
    print(f"{store}: {steps:,} steps", flush=True)
    with running_stack(data_dir, with_worker=False, api_workers=1, **urls) as stack:
        run_id = seed(stack.env, steps)
        api = psutil.Process(stack.processes["api"].pid)
        base = f"/api/runs/{run_id}"
        with httpx.Client(base_url=stack.url, timeout=600) as client:
            client.get(f"{base}/metrics", params={"limit": 1})  # imports and pools warm
            first = measure(client, api, f"{base}/metrics", max_points=DASHBOARD_POINTS)
            show(f"/metrics?max_points={DASHBOARD_POINTS}", first)
            show("  again (cached)", measure(client, api, f"{base}/metrics",
                                            max_points=DASHBOARD_POINTS))  # fmt: skip
            plain = measure(client, api, f"{base}/metrics")
            show("/metrics (no parameters)", plain)
            diagnosis = measure(client, api, f"{base}/diagnostics")
            show(f"/diagnostics, first (to step {diagnosis['body']['step']:,})", diagnosis)
            again = measure(client, api, f"{base}/diagnostics")
            show(f"/diagnostics, second (to step {again['body']['step']:,})", again)
            started, body = time.perf_counter(), again["body"]
            cpu = sum(api.cpu_times()[:2])
            while not body.get("is_current", True):
                if time.perf_counter() - started > CATCH_UP_TIMEOUT_S:
                    raise TimeoutError(f"diagnosis still at step {body['step']}")
                time.sleep(POLL_S)
                body = client.get(f"{base}/diagnostics").json()
            caught_up, cpu = time.perf_counter() - started, sum(api.cpu_times()[:2]) - cpu
            print(f"  caught up to step {body['step']:,} {caught_up:.1f} s after the second "
                  f"read ({cpu:.1f} s of the API's CPU), {len(body['items'])} findings",
                  flush=True)  # fmt: skip
            show("/diagnostics, caught up", measure(client, api, f"{base}/diagnostics"))
    return {
        "metrics_ms": first["ms"],
        "metrics_bytes": first["bytes"],
        "metrics_mib": first["mib"],
        "diagnostics_ms": diagnosis["ms"],
        "diagnostics_mib": diagnosis["mib"],
        "caught_up_s": caught_up,
        "caught_up_cpu_s": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.store == "sqlite":
            result = bench("sqlite", args.steps, Path(tmp))
        else:
            url = create_pg_database()
            try:
                result = bench("postgres", args.steps, Path(tmp), database_url=url,
                               broker_url=REDIS_URL)  # fmt: skip
            finally:
                drop_pg_database(url)
    print(f"long_run: steps={args.steps} " + " ".join(
        f"{k}={v:.0f}" if v >= 10 else f"{k}={v:.2f}" for k, v in result.items()))  # fmt: skip


if __name__ == "__main__":
    main()
