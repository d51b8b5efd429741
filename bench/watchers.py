"""What watching costs training: the demo spec with 0 and with N live SSE watchers.

    python bench/watchers.py                       embedded default (SQLite, no Redis), 2 rounds
    python bench/watchers.py --seeded 0.076        the steps written at the demo's idle rate
    python bench/watchers.py --store postgres --watchers 1000 --rounds 1 --no-baseline
        --seeded 0.076                             (one line) PostgreSQL + Redis

Each measurement starts a fresh service (API processes as `grpo up` starts them, one
worker), submits the demo spec (examples/arith-demo.yaml, 150 steps; --steps) and, for N > 0,
opens N streams before the run starts. Every watcher must receive every event of the run
exactly once and in order (checked against the database). Reported per measurement: the
median step time (`time/step` of the run's metrics), the delivery delay of every event to
every watcher (arrival minus the event's commit-time timestamp), the API processes' CPU
per second of training, the load generator's own CPU, and after the N-watcher run a reload
storm: 50 GET /metrics + 50 GET /histograms at once on the finished run. Rounds alternate
0 and N so drift on a shared machine hits both. All load goes to 127.0.0.1, bounded in
count and time. The last line:

    watchers: n=100 training_slowdown=<t_N/t_0> delivery_p95_s=<p> api_cpu_cores=<c>
        storm_p95_ms=<m>                                        (one line)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml
from sqlalchemy import create_engine, select

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.settings import Settings  # noqa: E402
from app.store.models import Event  # noqa: E402
from bench.sse_watchers import Watcher, get_once, watch  # noqa: E402
from tests.seed import go_and_finish, live_seeder  # noqa: E402
from tests.stack import (  # noqa: E402
    REDIS_URL,
    Stack,
    create_pg_database,
    drop_pg_database,
    running_stack,
)

STEPS, STORM, RUN_TIMEOUT_S = 150, 50, 900
FINAL = ("succeeded", "failed", "cancelled")


def demo_spec(queue: str) -> dict[str, Any]:
    spec = yaml.safe_load((ROOT / "examples" / "arith-demo.yaml").read_text())
    spec.update(max_steps=STEPS, resources={"queue": queue})
    return dict(spec)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def api_processes(api_pid: int) -> list[psutil.Process]:
    root = psutil.Process(api_pid)
    return [root, *root.children(recursive=True)]


def cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for proc in processes:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


async def wait_until(client: httpx.AsyncClient, run_id: str, done: Any, deadline: float) -> None:
    while not done((await client.get(f"/api/runs/{run_id}")).json()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} not done in {RUN_TIMEOUT_S}s")
        await asyncio.sleep(0.25)


async def follow_run(stack: Stack, n: int, *, seed_every: float | None) -> dict[str, Any]:
    """Submit the demo, open n watchers at once, and measure CPU while the steps come: from
    step 1 to the end when the worker trains it, or while the seeder writes them."""
    port = int(stack.url.rsplit(":", 1)[1])
    deadline = time.monotonic() + RUN_TIMEOUT_S
    async with httpx.AsyncClient(base_url=stack.url, timeout=60) as client:
        spec = demo_spec("parked" if seed_every else stack.queue)
        run_id = (await client.post("/api/runs", json=spec)).json()["id"]
        watchers = [Watcher() for _ in range(n)]
        path = f"/api/runs/{run_id}/events"
        seeding = live_seeder(stack.env, run_id, STEPS, seed_every) if seed_every else None
        proc = seeding.__enter__() if seeding else None
        tasks = [asyncio.create_task(watch(port, path, w, deadline=deadline)) for w in watchers]
        if proc is None:
            await wait_until(client, run_id, lambda r: r["step"] >= 1, deadline)
        else:
            await asyncio.sleep(2.0)  # every watcher is open and caught up
        api, me = api_processes(stack.processes["api"].pid), [psutil.Process()]
        worker = api_processes(stack.processes["worker"].pid) if "worker" in stack.processes else []
        api_start, me_start, wall_start = cpu_seconds(api), cpu_seconds(me), time.monotonic()
        worker_start = cpu_seconds(worker)
        if proc is not None:
            await asyncio.to_thread(go_and_finish, proc)
            seeding.__exit__(None, None, None)  # type: ignore[union-attr]
        await wait_until(client, run_id, lambda r: r["status"] in FINAL, deadline)
        wall = time.monotonic() - wall_start
        api_cpu = (cpu_seconds(api) - api_start) / wall
        me_cpu = (cpu_seconds(me) - me_start) / wall
        worker_cpu = (cpu_seconds(worker) - worker_start) / wall
        await asyncio.gather(*tasks)
        run = (await client.get(f"/api/runs/{run_id}")).json()
        metrics = (await client.get(f"/api/runs/{run_id}/metrics")).json()["items"]
    if run["status"] != "succeeded":
        raise RuntimeError(f"run {run_id} {run['status']}: {run['error']}")
    step_s = statistics.median(m["metrics"]["time/step"] for m in metrics)
    return {"run_id": run_id, "watchers": watchers, "api_cpu": api_cpu, "me_cpu": me_cpu,
            "worker_cpu": worker_cpu, "step_s": step_s}  # fmt: skip


def delivery_delays(database_url: str, run_id: str, watchers: list[Watcher]) -> list[float]:
    """Arrival minus commit-time stamp of every event at every watcher; raises unless each
    watcher got exactly the run's events, once each, in order."""
    engine = create_engine(database_url)
    with engine.connect() as conn:
        rows = conn.execute(
            select(Event.id, Event.created_at).where(Event.run_id == run_id).order_by(Event.id)
        ).all()
    engine.dispose()
    expected = [event_id for event_id, _ in rows]
    created = {event_id: at.timestamp() for event_id, at in rows}
    delays = []
    for number, watcher in enumerate(watchers):
        if watcher.ids != expected or not watcher.is_ended:
            raise AssertionError(
                f"watcher {number}: {len(watcher.ids)} events (expected {len(expected)}), "
                f"ended={watcher.is_ended}, errors={watcher.errors[:3]}"
            )
        opened = watcher.opened_at or 0.0
        delays += [
            at - created[i]
            for i, at in zip(watcher.ids, watcher.arrivals, strict=True)
            if created[i] >= opened  # older ones were history, not deliveries
        ]
    return delays


async def storm(url: str, run_id: str) -> list[float]:
    """50 /metrics and 50 /histograms at once on fresh connections: a room reloading."""
    port = int(url.rsplit(":", 1)[1])
    paths = [f"/api/runs/{run_id}/{what}" for what in ("metrics", "histograms")] * STORM
    return list(await asyncio.gather(*(get_once(port, p) for p in paths)))


def measure(store: str, n: int, data_dir: Path, seed_every: float | None) -> dict[str, Any]:
    database_url = create_pg_database() if store == "postgres" else None
    urls = {"database_url": database_url, "broker_url": REDIS_URL} if database_url else {}
    api_workers = Settings().resolved_api_processes
    try:
        with running_stack(
            data_dir, api_workers=api_workers, with_worker=not seed_every, **urls
        ) as stack:  # type: ignore[arg-type]
            result = asyncio.run(follow_run(stack, n, seed_every=seed_every))
            url = database_url or f"sqlite:///{data_dir / 'grpo.db'}"
            result["delays"] = delivery_delays(url, result["run_id"], result["watchers"])
            api = api_processes(stack.processes["api"].pid)
            before = cpu_seconds(api)
            result["storm"] = asyncio.run(storm(stack.url, result["run_id"])) if n else []
            result["storm_cpu_ms"] = (cpu_seconds(api) - before) * 1000 / (2 * STORM)
            result["api_workers"] = api_workers
    finally:
        if database_url:
            drop_pg_database(database_url)
    return result


def report(n: int, result: dict[str, Any]) -> None:
    delays, watchers = result["delays"], result["watchers"]
    line = (
        f"n={n:<5} step_median_s={result['step_s']:.4f}  api_cpu_cores={result['api_cpu']:.3f}  "
        f"client_cpu_cores={result['me_cpu']:.3f}  worker_cpu_cores={result['worker_cpu']:.2f}  "
        f"api_processes={result['api_workers']}"
    )
    if n:
        reconnects = sum(w.reconnects for w in watchers)
        line += (
            f"  delivery_p50_s={percentile(delays, 0.5):.3f} p95={percentile(delays, 0.95):.3f}"
            f" max={max(delays):.3f}  events={len(delays)}  reconnects={reconnects}"
            f"  storm_p50_ms={percentile(result['storm'], 0.5) * 1000:.0f}"
            f" p95={percentile(result['storm'], 0.95) * 1000:.0f}"
            f"  storm_api_cpu_ms_per_request={result['storm_cpu_ms']:.2f}"
        )
    print(line, flush=True)


def main() -> None:
    global STEPS
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--store", choices=["embedded", "postgres"], default="embedded")
    parser.add_argument("--no-baseline", action="store_true", help="skip the 0-watcher runs")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument(
        "--seeded",
        type=float,
        default=None,
        metavar="EVERY_S",
        help="no training: tests.seed writes a step every EVERY_S s (API cost without noise)",
    )
    args = parser.parse_args()
    STEPS = args.steps
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the stack on the way out
    n = args.watchers
    driver = f"seeded every {args.seeded} s" if args.seeded else "trained by the worker"
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; store {args.store}; "
          f"demo spec, {STEPS} steps {driver}; {n} watchers", flush=True)  # fmt: skip
    ratios, delays, cpus, storms = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds):
            step_0 = None
            for count in [n] if args.no_baseline else [0, n]:
                data_dir = Path(tmp) / f"r{round_index}-n{count}"
                result = measure(args.store, count, data_dir, args.seeded)
                report(count, result)
                if count == 0:
                    step_0 = result["step_s"]
                    continue
                if step_0 and not args.seeded:
                    ratios.append(result["step_s"] / step_0)
                delays += result["delays"]
                cpus.append(result["api_cpu"])
                storms += result["storm"]
    slowdown = f"{statistics.median(ratios):.2f}" if ratios else "nan"
    print(
        f"watchers: n={n} training_slowdown={slowdown} "
        f"delivery_p95_s={percentile(delays, 0.95):.3f} "
        f"api_cpu_cores={statistics.median(cpus):.3f} "
        f"storm_p95_ms={percentile(storms, 0.95) * 1000:.0f}"
    )


if __name__ == "__main__":
    main()
