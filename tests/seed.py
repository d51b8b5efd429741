"""Seed runs straight into the store, with the rows a worker writes: for load, render and
live-update tests and the benches. Run with the stack's GRPO_* environment:

    python -m tests.seed STEPS              a finished run of STEPS steps; prints its id
    python -m tests.seed into RUN STEPS [EVAL_EVERY]
        STEPS steps and their events into an existing run (with an evaluation, scalars only,
        every EVAL_EVERY steps if given)
    python -m tests.seed live RUN STEPS [EVERY_S [LOG_BYTES]]
        claims the (queued) run as a worker would and prints "claimed"; on a line on stdin,
        writes one step every EVERY_S seconds (default 0.05) through save_step (each followed
        by a log line of LOG_BYTES characters, if given), prints a JSON summary of the writes;
        on another line, marks the run succeeded

Bulk seeding goes in big batches (save_step's one transaction per step would take minutes
for 10,000 steps); live seeding is save_step itself, so the real stream carries each step.
Steps are synthetic but consistent: real groups of rewards, their advantages, scalars and
histograms computed from them, as the trainer would. Nothing is faked downstream.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from app.store import db, events, runs, steps
from app.store.bulk import bulk_insert
from app.store.models import Event, Run, StepMetric
from grpo.report import (
    ADVANTAGE_BIN_EDGES,
    GROUP_REWARD_STD_BIN_EDGES,
    REWARD_BIN_EDGES,
    GroupReport,
    StepReport,
    histogram,
)
from grpo.spec import JobSpec

METRIC_KEYS = [
    "reward", "reward_std", "rewards/accuracy/mean", "rewards/accuracy/std", "kl", "beta",
    "loss", "entropy", "grad_norm", "learning_rate", "clip_ratio/low", "clip_ratio/high",
    "clip_ratio/region", "completions/mean_length", "completions/min_length",
    "completions/max_length", "completions/clipped_ratio", "frac_reward_zero_std",
    "groups/all_fail", "groups/all_pass", "groups/mixed", "reward_within_group_var_share",
    "time/generate", "time/reward", "time/reference", "time/train", "time/step",
    "tokens_per_second",
]  # fmt: skip
GROUPS, G = 8, 8


def synthetic_groups(progress: float, rng: random.Random) -> list[GroupReport]:
    """0/1 accuracy rewards, each prompt with its own difficulty, all easier as training goes."""
    groups = []
    for b in range(GROUPS):
        p = min(1.0, max(0.0, 0.15 + 0.7 * progress + rng.uniform(-0.4, 0.4)))
        rewards = [float(rng.random() < p) for _ in range(G)]
        mean = sum(rewards) / G
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / G)
        advantages = [(r - mean) / (std + 1e-4) for r in rewards]
        prompt_id = f"arith-{rng.randint(0, 9999)}"
        passes = [r >= 1.0 for r in rewards]  # accuracy decides, as grpo/report/outcome.py says
        groups.append(
            GroupReport(b, prompt_id, f"{b}+{b}=", str(2 * b), rewards, advantages, passes=passes)
        )
    return groups


def synthetic_scalars(
    progress: float, groups: list[GroupReport], rng: random.Random
) -> dict[str, float]:
    values = {key: rng.random() for key in METRIC_KEYS}
    rewards = [r for g in groups for r in g.rewards]
    outcomes = [g.outcome for g in groups]
    mean = sum(rewards) / len(rewards)
    values.update({"reward": mean, "rewards/accuracy/mean": mean, "beta": 0.04})
    values["reward_std"] = sum(g.reward_std for g in groups) / len(groups)
    values["kl"] = 0.02 * progress + abs(rng.gauss(0, 0.002))
    for outcome in ("all_fail", "all_pass", "mixed"):
        values[f"groups/{outcome}"] = outcomes.count(outcome)
    values["frac_reward_zero_std"] = sum(g.reward_std == 0 for g in groups) / len(groups)
    return values


def synthetic_step(step: int, total: int, rng: random.Random) -> StepReport:
    progress = step / total
    groups = synthetic_groups(progress, rng)
    return StepReport(
        step=step,
        total_steps=total,
        scalars=steps.compact_scalars(synthetic_scalars(progress, groups, rng)),
        groups=groups,
        advantage_histogram=histogram(
            [a for g in groups for a in g.advantages], ADVANTAGE_BIN_EDGES
        ),
        reward_histogram=histogram([r for g in groups for r in g.rewards], REWARD_BIN_EDGES),
        group_reward_std_histogram=histogram(
            [g.reward_std for g in groups], GROUP_REWARD_STD_BIN_EDGES
        ),
    )


def metric_row(run_id: str, report: StepReport) -> dict[str, Any]:
    return {"run_id": run_id, **steps.step_payload(report)}


def seed_run(num_steps: int, *, seed: int = 0) -> str:
    """A finished run of num_steps steps (step rows only: no groups, no events)."""
    rng = random.Random(seed)
    spec = JobSpec(name=f"seeded-{num_steps}", model="builtin:tiny", max_steps=num_steps)
    run, _ = db.call(runs.create_run, spec, package_version="seed")
    for first in range(1, num_steps + 1, 1000):
        last = min(first + 1000, num_steps + 1)
        rows = [metric_row(run.id, synthetic_step(s, num_steps, rng)) for s in range(first, last)]
        with db.session() as session:
            bulk_insert(session, StepMetric, rows)
    db.call(runs.claim_run, run.id, worker="seed", device="cpu")
    db.call(runs.finish_run, run.id, status="succeeded")
    return run.id


def seed_scalars(run_id: str, total: int, *, seed: int = 0, eval_every: int = 0) -> None:
    """Steps 1..total into an existing run as step rows of scalars alone (METRIC_KEYS, each
    uniform in [0, 1), 6 digits; no groups, no events): what a long run's curves and its
    doctor read, seeded in a second for 20,000 steps. With eval_every, `eval/accuracy` on
    every eval_every-th step. The same seed gives the same rows."""
    rng = random.Random(seed)
    rows = []
    for step in range(1, total + 1):
        scalars = {key: round(rng.random(), 6) for key in METRIC_KEYS}
        if eval_every and step % eval_every == 0:
            scalars["eval/accuracy"] = round(rng.random(), 6)
        rows.append({"run_id": run_id, "step": step, "metrics": scalars,
                     "advantage_histogram": [], "reward_histogram": []})  # fmt: skip
    with db.session() as session:
        for first in range(0, total, 5000):
            bulk_insert(session, StepMetric, rows[first : first + 5000])


def synthetic_eval(step: int, total: int) -> dict[str, float]:
    """An evaluation's scalars, rising with training as the synthetic rewards do."""
    accuracy = round(0.2 + 0.6 * step / total, 4)
    return {"eval/accuracy": accuracy, "eval/reward": accuracy}


def seed_steps(run_id: str, total: int, *, seed: int = 0, eval_every: int = 0) -> None:
    """Steps 1..total and their events into an existing run, in one transaction; with
    eval_every, an evaluation every eval_every steps, its scalars merged into its step's
    metrics as the trainer merges them, and its `eval` event (without examples)."""
    rng = random.Random(seed)
    reports = [synthetic_step(step, total, rng) for step in range(1, total + 1)]
    evaluated = reports[eval_every - 1 :: eval_every] if eval_every else []
    evals = {r.step: synthetic_eval(r.step, total) for r in evaluated}
    for r in reports:
        r.scalars.update(evals.get(r.step, {}))
    with db.session() as session:
        session.execute(insert(StepMetric), [metric_row(run_id, r) for r in reports])
        events = [{"run_id": run_id, "kind": "step", "step": r.step,
                   "payload": steps.step_payload(r)} for r in reports]  # fmt: skip
        events += [{"run_id": run_id, "kind": "eval", "step": step,
                    "payload": {"step": step, "metrics": metrics, "examples": []}}
                   for step, metrics in evals.items()]  # fmt: skip
        session.execute(insert(Event), events)
        run = session.get(Run, run_id)
        assert run is not None, run_id
        run.step = total
        run.last_metrics = {k: reports[-1].scalars[k] for k in steps.SUMMARY_KEYS}


def write_live(
    run_id: str, total: int, every: float, *, log_bytes: int = 0, seed: int = 0
) -> dict[str, float]:
    """One save_step every `every` seconds on a fixed schedule (a slow write does not shift
    the ones after it); returns how the writes kept to it."""
    rng = random.Random(seed)
    durations, late = [], 0.0
    start = time.perf_counter()
    for step in range(1, total + 1):
        due = start + (step - 1) * every
        time.sleep(max(0.0, due - time.perf_counter()))
        late = max(late, time.perf_counter() - due)
        began = time.perf_counter()
        db.call(steps.save_step, run_id, synthetic_step(step, total, rng))
        if log_bytes:
            db.call(events.add_log, run_id, "info", f"step {step} " + "x" * log_bytes)
        durations.append(time.perf_counter() - began)
    return {
        "steps": total,
        "seconds": time.perf_counter() - start,
        "write_ms_median": 1000 * sorted(durations)[len(durations) // 2],
        "write_ms_max": 1000 * max(durations),
        "late_ms_max": 1000 * late,
    }


def live(run_id: str, total: int, every: float, log_bytes: int) -> None:
    assert db.call(runs.claim_run, run_id, worker="seed-live", device="cpu") is not None, run_id
    print("claimed", flush=True)
    sys.stdin.readline()
    print(json.dumps(write_live(run_id, total, every, log_bytes=log_bytes)), flush=True)
    sys.stdin.readline()
    db.call(runs.finish_run, run_id, status="succeeded")


@contextmanager
def live_seeder(
    env: dict[str, str], run_id: str, total: int, every: float, log_bytes: int = 0
) -> Iterator[subprocess.Popen[str]]:
    """`live` in its own process on a stack's store (env); yields once it claimed the run."""
    args = ["live", run_id, str(total), str(every), str(log_bytes)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.seed", *args],
        cwd=Path(__file__).resolve().parent.parent, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin and proc.stdout
    try:
        assert proc.stdout.readline().strip() == "claimed"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()


def go_and_finish(proc: subprocess.Popen[str]) -> dict[str, float]:
    """Tell a live_seeder to write its steps, then to mark the run succeeded."""
    assert proc.stdin and proc.stdout
    proc.stdin.write("go\n")
    proc.stdin.flush()
    writes: dict[str, float] = json.loads(proc.stdout.readline())
    proc.communicate("finish\n", timeout=60)
    return writes


if __name__ == "__main__":
    match sys.argv[1:]:
        case ["into", run_id, total, *rest]:
            seed_steps(run_id, int(total), eval_every=int(rest[0]) if rest else 0)
        case ["live", run_id, total, *rest]:
            every = float(rest[0]) if rest else 0.05
            live(run_id, int(total), every, int(rest[1]) if len(rest) > 1 else 0)
        case [total]:
            print(seed_run(int(total)))
        case _:
            sys.exit(__doc__)
