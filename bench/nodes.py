"""Steps per second of one run on 2 nodes x 1 rank (two hosts made on this machine, one
service worker each) over the same spec on 1 node x 1 rank, submitted through the API.

    python bench/nodes.py [--spec bench/scaling-small.yaml] [--steps 5] [--repeats 3]

The hosts are tests/hosts.py's: network namespaces on a bridge, each with its own address,
PostgreSQL, Redis and the API reached over the bridge only (the API and the forwarders run
on the machine itself, unpinned). One `celery worker` in each host, both on one data
directory (a gang's nodes must share it), each pinned to its own core (`taskset -c`; it
then holds one CPU slot, and its rank runs on that core). The spec is submitted as
`num_nodes: 2` (a gang of both workers, one gloo rank each, across the bridge) and as one
node (on a queue only host 0's worker consumes, so on its one core); one run at a time,
the sides alternating (2 nodes first in even repeats), `--repeats` times.

A run's speed is 1 / the median of its stored steps' `time/step` after the first (warm-up,
as bench/scaling.py; on 2 nodes the max over ranks, as the trainer reports it); the repeat's
speedup is 2-node steps/s over 1-node steps/s, and the figure is the median over repeats
with their min-max. "Turn to turn" is the same from the bench's polling of the run's step
(steps 1 to N over their wall time: the step, its report and the store). "Start" is submit
to step 1 as the bench saw it, and each line of the run's log is printed with its seconds
from submit (the gang's claims and formation). Last line:

    nodes: speedup=<median> spread=<min>-<max> repeats=<n>

Needs root and iproute2 (the hosts), PostgreSQL and Redis on 127.0.0.1 as the tests use.
Builds, then removes, the namespaces, the bridge and every process it started.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import yaml  # noqa: E402

from grpo.models.loading import resolve_model_path  # noqa: E402
from tests.hosts import Network, hosts_and_api, start_host_worker  # noqa: E402
from tests.stack import Stack  # noqa: E402

SIDES = ("nodes", "one")
FINAL = {"succeeded", "failed", "cancelled"}


@dataclass
class Side:
    """One run of one side, as the bench saw it and as the store kept it."""

    side: str
    run_id: str
    step_times: list[float]
    """`time/step` of every stored step, in step order."""
    start_s: float
    """Submit to step 1 stored, polled."""
    turn_s: float
    """Wall seconds a step from step 1 to the last, polled."""
    log: list[tuple[float, str]] = field(default_factory=list)
    """The run's log lines, each with its seconds after the run was created."""

    @property
    def steps_per_s(self) -> float:
        return steps_per_second(self.step_times)


def steps_per_second(step_times: list[float]) -> float:
    """1 / the median step time after the first step (warm-up)."""
    if len(step_times) < 2:
        raise ValueError("a run's speed needs at least 2 steps (the first is warm-up)")
    return 1 / statistics.median(step_times[1:])


def order(repeat: int) -> tuple[str, str]:
    """The sides of one repeat in the order they run: 2 nodes first in even repeats."""
    return SIDES if repeat % 2 == 0 else (SIDES[1], SIDES[0])


def run_spec(data: dict[str, Any], side: str, steps: int, queues: dict[str, str]) -> dict:
    """The API body of one side: the spec cut to `steps` steps and no checkpoints, on 2 nodes
    of 1 rank or on 1 node of 1 rank, on that side's queue."""
    nodes = 2 if side == "nodes" else 1
    resources = {**data.get("resources", {}), "queue": queues[side], "num_processes": 1,
                 "num_nodes": nodes}  # fmt: skip
    return {**data, "name": f"{data['name']}-{side}", "max_steps": steps, "save_steps": 0,
            "save_final": False, "resources": resources}  # fmt: skip


def summary(ratios: list[float]) -> str:
    """The last line: the median speedup over repeats and its spread."""
    return (
        f"nodes: speedup={statistics.median(ratios):.3f} "
        f"spread={min(ratios):.3f}-{max(ratios):.3f} repeats={len(ratios)}"
    )


def log_offsets(created_at: str, items: list[dict[str, str]]) -> list[tuple[float, str]]:
    """The run's log lines (GET /api/runs/{id}/logs items), each with its seconds after the
    run's `created_at`."""
    start = datetime.fromisoformat(created_at)
    return [
        ((datetime.fromisoformat(i["created_at"]) - start).total_seconds(), i["message"])
        for i in items
    ]


def watch(
    client: httpx.Client, run_id: str, submitted: float, timeout: float
) -> tuple[float, float]:
    """Polls the run to its end: (submit to step 1, wall seconds a step after step 1)."""
    first = last = None
    steps = 0
    deadline = submitted + timeout
    while time.monotonic() < deadline:
        run = client.get(f"/api/runs/{run_id}").json()
        now = time.monotonic()
        if run["step"] >= 1 and first is None:
            first = now
        if run["step"] > steps:
            steps, last = run["step"], now
        if run["status"] in FINAL:
            if run["status"] != "succeeded" or first is None or last is None:
                raise RuntimeError(f"nodes: run {run_id} ended {run['status']}: {run['error']}")
            return first - submitted, (last - first) / max(1, steps - 1)
        time.sleep(0.25)
    raise TimeoutError(f"nodes: run {run_id} not done in {timeout:g} s")


def run_side(client: httpx.Client, body: dict, side: str, timeout: float) -> Side:
    """Submits one side's run, waits for it, and reads its steps and log."""
    submitted = time.monotonic()
    answer = client.post("/api/runs", json=body)
    if answer.status_code != 201:
        raise RuntimeError(f"nodes: submit refused: {answer.text}")
    run_id = answer.json()["id"]
    start_s, turn_s = watch(client, run_id, submitted, timeout)
    rows = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
    run = client.get(f"/api/runs/{run_id}").json()
    logs = client.get(f"/api/runs/{run_id}/logs").json()["items"]
    times = [r["metrics"]["time/step"] for r in sorted(rows, key=lambda r: r["step"])]
    return Side(side, run_id, times, start_s, turn_s, log_offsets(run["created_at"], logs))


def start_workers(net: Network, stack: Stack, cpus: list[int]) -> dict[str, str]:
    """A worker in each host, each on its own core; host 0's also consumes the one-node
    queue. Both see one data directory, as the gang asks (docs/how-to/scaling.md, "Storage
    the nodes must share"). Returns each side's queue."""
    queues = {"nodes": stack.queue, "one": f"{stack.queue}-one"}
    shared = str(net.base_dir / "shared")
    for i, host in enumerate(net.hosts):
        extra = {"GRPO_WORKER_ADDRESS": host.address, "GRPO_DATA_DIR": shared}
        queue = f"{queues['nodes']},{queues['one']}" if i == 0 else queues["nodes"]
        start_host_worker(stack, net, host, f"node{i}", extra, queue=queue, cpus=str(cpus[i]))
    return queues


def wait_ready(client: httpx.Client, count: int, timeout: float = 300) -> None:
    """Until `count` workers have said they are ready (GET /api/workers lists them): a run
    submitted before would time a worker's start, not its gang's."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(client.get("/api/workers").json()["items"]) >= count:
            return
        time.sleep(0.5)
    raise TimeoutError(f"nodes: fewer than {count} workers ready after {timeout:g} s")


def report(side: Side) -> None:
    print(
        f"  {side.side:5} run {side.run_id}: {side.steps_per_s:.4f} steps/s "
        f"(time/step after the first: {', '.join(f'{t:.2f}' for t in side.step_times[1:])} s); "
        f"turn to turn {side.turn_s:.2f} s; start {side.start_s:.1f} s"
    )
    for offset, message in side.log:
        print(f"      +{offset:6.1f} s  {message[:160]}")


def measure(args: argparse.Namespace, base: Path) -> list[float]:
    data: dict[str, Any] = yaml.safe_load(args.spec.read_text())
    cache = Path(os.environ.get("GRPO_CACHE_DIR", "~/.cache/grpo")).expanduser()
    resolve_model_path(data["model"], cache, progress=False)  # built once, before any run
    cpus = sorted(os.sched_getaffinity(0))[:2]
    ratios = []
    with hosts_and_api(2, base) as (net, stack), stack.client() as client:
        try:
            queues = start_workers(net, stack, cpus)
            wait_ready(client, len(net.hosts))
            for repeat in range(args.repeats):
                sides = {}
                for side in order(repeat):
                    body = run_spec(data, side, args.steps, queues)
                    sides[side] = run_side(client, body, side, args.timeout)
                ratios.append(sides["nodes"].steps_per_s / sides["one"].steps_per_s)
                turn = sides["one"].turn_s / sides["nodes"].turn_s
                print(f"repeat {repeat + 1}: speedup {ratios[-1]:.3f} (turn to turn {turn:.3f}); "
                      f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
                for side in order(repeat):
                    report(sides[side])
        finally:
            if args.keep_logs:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                for log in stack.data_dir.glob("*.log"):
                    shutil.copy(log, args.keep_logs / log.name)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, default=ROOT / "bench" / "scaling-small.yaml")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900, help="seconds a run may take")
    parser.add_argument("--keep-logs", type=Path, default=None, help="copy the workers' logs here")
    args = parser.parse_args()
    before = os.getloadavg()
    print(f"cores: {os.cpu_count()}; spec {args.spec.name}, {args.steps} steps a run; "
          f"load average before {' '.join(f'{x:.1f}' for x in before)}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="grpo-nodes-") as tmp:
        ratios = measure(args, Path(tmp))
    print(f"load average after {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(summary(ratios))


if __name__ == "__main__":
    main()
