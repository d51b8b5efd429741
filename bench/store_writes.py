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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.store import db, runs, steps  # noqa: E402
from grpo.report import (
    ADVANTAGE_BIN_EDGES,
    GROUP_REWARD_STD_BIN_EDGES,
    REWARD_BIN_EDGES,
    CompletionReport,
    GroupReport,
    StepReport,
)
from grpo.spec import JobSpec
from tests.seed import METRIC_KEYS, seed_run


def scalars(rng: random.Random) -> dict[str, float]:
    return {k: rng.random() for k in METRIC_KEYS}


def pieces(text: str, num_tokens: int) -> list[str]:
    """num_tokens pieces that join back to text, as a tokenizer's would."""
    cut = [len(text) * i // num_tokens for i in range(num_tokens + 1)]
    return [text[a:b] for a, b in zip(cut, cut[1:], strict=False)]


def big_report(step: int, rng: random.Random) -> StepReport:
    groups = []
    for g in range(64):
        texts = [
            f"<think>{rng.randint(0, 10**9)}</think><answer>{rng.randint(0, 99)}</answer>"
            for _ in range(16)
        ]
        completions = [
            CompletionReport(
                text=text,
                num_tokens=32,
                is_truncated=rng.random() < 0.1,
                rewards={"accuracy": 1.0},
                reward=float(rng.randint(0, 1)),
                advantage=rng.gauss(0, 1),
                kl=rng.random() / 100,
                token_kls=[round(rng.random() / 100, 5) for _ in range(32)],
                tokens=pieces(text, 32),
            )
            for text in texts
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
                passes=[c.reward >= 1 for c in completions],
            )
        )
    return StepReport(
        step=step,
        total_steps=step,
        scalars=scalars(rng),
        groups=groups,
        advantage_histogram=[1] * (len(ADVANTAGE_BIN_EDGES) - 1),
        reward_histogram=[1] * (len(REWARD_BIN_EDGES) - 1),
        group_reward_std_histogram=[1] * (len(GROUP_REWARD_STD_BIN_EDGES) - 1),
    )


def main(num_steps: int) -> None:
    rng = random.Random(0)
    start = time.perf_counter()
    run_id = seed_run(num_steps)
    fill_s = time.perf_counter() - start
    big, _ = db.call(
        runs.create_run, JobSpec(model="builtin:tiny", max_steps=20), package_version="bench"
    )
    timings = []
    for step in range(1, 12):
        report = big_report(step, rng)
        start = time.perf_counter()
        db.call(steps.save_step, big.id, report)
        timings.append((time.perf_counter() - start) * 1000)
    print(
        json.dumps(
            {"run_id": run_id, "step_write_ms": statistics.median(timings[1:]), "fill_s": fill_s}
        )
    )


if __name__ == "__main__":
    main(int(sys.argv[1]))
