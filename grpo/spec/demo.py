"""What the built-in demo promises (examples/arith-demo.yaml, the dashboard's "Run the
demo"): the one place its numbers are written. The README, the tutorial, the example's
comment and the demo preset quote these, and tests/train/test_demo_promise.py checks every
quote and that the demo's 300 recorded steps (tests/data/doctor_arith_demo.json) fall in them.

Ranges, not values: `builtin:tiny-arith` is warm-started on first use on each machine, and
fp32 sums change with the number of threads, so two machines train different numbers (issue
44). Seen so far (seed 0; reward: mean of the first and of the last 10 steps):

| where | reward | time |
|---|---|---|
| the recorded steps, on a loaded 2-core machine | 0.31 -> 0.58 | 172 s |
| the same numbers with `grpo train` on a quiet 2-core machine | 0.31 -> 0.58 | 24 s |
| a newcomer's `make up`, "Run the demo", on a busy machine | 0.30 -> 0.54 | 75 s |
| `grpo train` on a 2-core VM running a test suite, 1 thread | 0.31 -> 0.53 | 70 s |
| the same, 2 threads (the same steps up to step 136) | 0.31 -> 0.54 | 98 s |
"""

from __future__ import annotations

DEMO_STEPS = 300
DEMO_REWARD_FROM = (0.30, 0.31)
"""Sampled reward, mean of the first 10 steps: the lowest and the highest seen."""
DEMO_REWARD_TO = (0.53, 0.58)
"""Sampled reward, mean of the last 10 of the DEMO_STEPS steps: the lowest and highest seen."""
DEMO_SECONDS = (25, 180)
"""Time of the DEMO_STEPS steps on 2 CPU cores, quiet to busy (rounded out)."""
DEMO_PROMISE = (
    f"reward {DEMO_REWARD_FROM[0]:.2f}-{DEMO_REWARD_FROM[1]:.2f} -> "
    f"{DEMO_REWARD_TO[0]:.2f}-{DEMO_REWARD_TO[1]:.2f} over {DEMO_STEPS} steps"
)
"""As the README and the docs quote it."""
DEMO_TIME = f"{DEMO_SECONDS[0]} s to {DEMO_SECONDS[1] // 60} minutes on 2 CPU cores"
"""How long it takes, as the README, the docs and the preset quote it."""
