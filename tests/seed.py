"""Seed a finished run with many steps straight into the store (for load and render tests).

    python -m tests.seed STEPS      (with the stack's GRPO_* environment)

Prints the run id. Rows go in through app.store in big batches, scalars compacted as
save_step stores them: a long run's rows as they look after the fact. Nothing is faked.
"""

from __future__ import annotations

import math
import random
import sys

from app.store import runs
from app.store.bulk import bulk_insert
from app.store.db import session_scope
from app.store.models import StepMetric
from app.store.steps import compact_scalars
from grpo.report import ADVANTAGE_BIN_EDGES, REWARD_BIN_EDGES
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


def metrics_at(step: int, total: int, rng: random.Random) -> dict[str, float]:
    """Plausible curves: reward rising, KL growing, noise on everything."""
    progress = step / total
    values = {key: rng.random() for key in METRIC_KEYS}
    values["reward"] = 0.3 + 0.5 * (1 - math.exp(-4 * progress)) + rng.gauss(0, 0.03)
    values["kl"] = 0.02 * progress + abs(rng.gauss(0, 0.002))
    return values


def seed_run(num_steps: int, *, seed: int = 0) -> str:
    rng = random.Random(seed)
    spec = JobSpec(name=f"seeded-{num_steps}", model="builtin:tiny", max_steps=num_steps)
    run, _ = runs.create_run(spec, package_version="seed")
    for first in range(1, num_steps + 1, 1000):
        rows = [
            {"run_id": run.id, "step": step,
             "metrics": compact_scalars(metrics_at(step, num_steps, rng)),
             "advantage_histogram": [rng.randint(0, 9) for _ in ADVANTAGE_BIN_EDGES[1:]],
             "reward_histogram": [rng.randint(0, 9) for _ in REWARD_BIN_EDGES[1:]]}
            for step in range(first, min(first + 1000, num_steps + 1))
        ]  # fmt: skip
        with session_scope() as session:
            bulk_insert(session, StepMetric, rows)
    runs.claim_run(run.id, worker="seed", device="cpu")
    runs.finish_run(run.id, status="succeeded")
    return run.id


if __name__ == "__main__":
    print(seed_run(int(sys.argv[1])))
