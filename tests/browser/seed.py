"""Writes N synthetic steps into an existing run, the rows a worker's save_step writes.

The public API has no write path for metrics (only a worker writes them), so the
performance test seeds a long run with this script, run as a subprocess with the stack's
environment:  python -m tests.browser.seed <run_id> <steps>
One transaction for all steps: save_step's one-per-step would take minutes for 10,000.
"""

from __future__ import annotations

import math
import random
import sys

from sqlalchemy import insert

from app.store.db import session_scope
from app.store.models import Event, Run, StepMetric
from app.store.steps import SUMMARY_KEYS, step_payload
from grpo.report import ADVANTAGE_BIN_EDGES, REWARD_BIN_EDGES, StepReport


def synthetic_step(step: int, total: int, rng: random.Random) -> StepReport:
    progress = step / total
    reward = math.tanh(3 * progress) + rng.gauss(0, 0.05)
    fail = max(0.0, 0.6 - progress) * 8
    passed = min(8.0 - fail, progress * 6)
    scalars = {
        "reward": reward,
        "reward_std": 0.4 - 0.2 * progress,
        "rewards/accuracy/mean": reward,
        "rewards/accuracy/std": 0.3,
        "kl": 0.02 * progress + rng.random() * 0.002,
        "beta": 0.04,
        "loss": rng.gauss(0, 0.02),
        "entropy": 2.0 - progress,
        "grad_norm": 0.5 + rng.random(),
        "learning_rate": 1e-5,
        "clip_ratio/low": rng.random() * 0.01,
        "clip_ratio/high": rng.random() * 0.01,
        "clip_ratio/region": rng.random() * 0.02,
        "completions/mean_length": 6 + rng.random(),
        "completions/min_length": 1.0,
        "completions/max_length": 8.0,
        "completions/clipped_ratio": 0.1,
        "groups/all_fail": fail,
        "groups/all_pass": passed,
        "groups/mixed": 8.0 - fail - passed,
        "time/generate": 0.5,
        "time/reward": 0.01,
        "time/reference": 0.1,
        "time/train": 0.3,
        "time/step": 0.91,
        "tokens_per_second": 500.0,
    }
    return StepReport(
        step=step,
        total_steps=total,
        scalars=scalars,
        advantage_histogram=[rng.randint(0, 9) for _ in range(len(ADVANTAGE_BIN_EDGES) - 1)],
        reward_histogram=[rng.randint(0, 9) for _ in range(len(REWARD_BIN_EDGES) - 1)],
    )


def main() -> None:
    run_id, total = sys.argv[1], int(sys.argv[2])
    rng = random.Random(0)
    reports = [synthetic_step(step, total, rng) for step in range(1, total + 1)]
    with session_scope() as session:
        session.execute(
            insert(StepMetric),
            [
                {
                    "run_id": run_id,
                    "step": r.step,
                    "metrics": r.scalars,
                    "advantage_histogram": r.advantage_histogram,
                    "reward_histogram": r.reward_histogram,
                }
                for r in reports
            ],
        )
        session.execute(
            insert(Event),
            [
                {"run_id": run_id, "kind": "step", "step": r.step, "payload": step_payload(r)}
                for r in reports
            ],
        )
        run = session.get(Run, run_id)
        assert run is not None, run_id
        run.step = total
        run.last_metrics = {k: reports[-1].scalars[k] for k in SUMMARY_KEYS}


if __name__ == "__main__":
    main()
