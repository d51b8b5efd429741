"""What the built-in demo promises (examples/arith-demo.yaml, the dashboard's "Run the
demo"): the one place its numbers are written. The README, the tutorial, the example's
comment and the demo preset quote these, and tests/train/test_demo_promise.py checks every
quote and the numbers against the demo's 300 recorded steps (tests/data/doctor_arith_demo.json).
"""

from __future__ import annotations

DEMO_STEPS = 300
DEMO_REWARD_FROM = 0.31
"""Sampled reward, mean of the first 10 steps (seed 0, fp32)."""
DEMO_REWARD_TO = 0.58
"""Sampled reward, mean of the last 10 of the DEMO_STEPS steps."""
DEMO_PROMISE = f"reward {DEMO_REWARD_FROM:.2f} -> {DEMO_REWARD_TO:.2f} over {DEMO_STEPS} steps"
"""As the README and the docs quote it."""
