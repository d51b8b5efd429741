"""Helper of bench/api.py: fills a 10,000-step run, then times single big step writes.

Runs in its own process so the store reads GRPO_DATABASE_URL from the stack's environment.
Prints one JSON line: {"run_id", "step_write_ms", "fill_s"}.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time

from app.store import runs, steps
from app.store.bulk import bulk_insert
from app.store.db import session_scope
from app.store.models import StepMetric
from grpo.report import (
    ADVANTAGE_BIN_EDGES,
    REWARD_BIN_EDGES,
    CompletionReport,
    GroupReport,
    StepReport,
)
from grpo.spec import JobSpec

KEYS = [
    "reward",
    "reward_std",
    "rewards/accuracy/mean",
    "rewards/accuracy/std",
    "kl",
    "beta",
    "loss",
    "entropy",
    "grad_norm",
    "learning_rate",
    "clip_ratio/low",
    "clip_ratio/high",
    "clip_ratio/region",
    "completions/mean_length",
    "completions/min_length",
    "completions/max_length",
    "completions/clipped_ratio",
    "frac_reward_zero_std",
    "groups/all_fail",
    "groups/all_pass",
    "groups/mixed",
    "reward_within_group_var_share",
    "time/generate",
    "time/reward",
    "time/reference",
    "time/train",
    "time/step",
    "tokens_per_second",
]


def scalars(rng: random.Random) -> dict[str, float]:
    return {k: rng.random() for k in KEYS}


def big_report(step: int, rng: random.Random) -> StepReport:
    groups = []
    for g in range(64):
        completions = [
            CompletionReport(
                text=f"<think>{rng.randint(0, 10**9)}</think><answer>{rng.randint(0, 99)}</answer>",
                num_tokens=32,
                is_truncated=rng.random() < 0.1,
                rewards={"accuracy": 1.0},
                reward=float(rng.randint(0, 1)),
                advantage=rng.gauss(0, 1),
                kl=rng.random() / 100,
                token_kls=[round(rng.random() / 100, 5) for _ in range(32)],
            )
            for _ in range(16)
        ]
        groups.append(
            GroupReport(
                index=g,
                prompt_id=f"arith-{rng.randint(0, 5000)}",
                prompt=f"{g}+{g}=",
                answer=str(2 * g),
                rewards=[c.reward for c in completions],
                advantages=[c.advantage for c in completions],
                completions=completions,
            )
        )
    return StepReport(
        step=step,
        total_steps=step,
        scalars=scalars(rng),
        groups=groups,
        advantage_histogram=[1] * (len(ADVANTAGE_BIN_EDGES) - 1),
        reward_histogram=[1] * (len(REWARD_BIN_EDGES) - 1),
    )


def fill_metrics(run_id: str, num_steps: int, rng: random.Random) -> None:
    """Setup only: a long run's metric rows in a few transactions (a worker writes one per step)."""
    for first in range(1, num_steps + 1, 1000):
        rows = [
            {
                "run_id": run_id,
                "step": step,
                "metrics": scalars(rng),
                "advantage_histogram": [],
                "reward_histogram": [],
            }
            for step in range(first, min(first + 1000, num_steps + 1))
        ]
        with session_scope() as session:
            bulk_insert(session, StepMetric, rows)


def main(num_steps: int) -> None:
    rng = random.Random(0)
    run, _ = runs.create_run(
        JobSpec(model="builtin:tiny", max_steps=num_steps), package_version="bench"
    )
    start = time.perf_counter()
    fill_metrics(run.id, num_steps, rng)
    fill_s = time.perf_counter() - start
    big, _ = runs.create_run(JobSpec(model="builtin:tiny", max_steps=20), package_version="bench")
    timings = []
    for step in range(1, 12):
        report = big_report(step, rng)
        start = time.perf_counter()
        steps.save_step(big.id, report)
        timings.append((time.perf_counter() - start) * 1000)
    print(
        json.dumps(
            {"run_id": run.id, "step_write_ms": statistics.median(timings[1:]), "fill_s": fill_s}
        )
    )


if __name__ == "__main__":
    main(int(sys.argv[1]))
