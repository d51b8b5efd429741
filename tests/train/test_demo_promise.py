"""One source for what the demo promises (grpo/spec/demo.py): the numbers are the demo's own
(its 300 recorded steps), and every place that quotes them quotes the same."""

import json
import re
from pathlib import Path

import pytest

from app.api.routes.presets import PRESETS
from grpo.spec.demo import DEMO_PROMISE, DEMO_REWARD_FROM, DEMO_REWARD_TO, DEMO_STEPS

ROOT = Path(__file__).resolve().parents[2]
QUOTE = re.compile(r"reward\s+(0\.\d+)\s*->\s*(0\.\d+)\s+over\s+(\d+)\s+steps")


def test_the_promise_is_what_the_demo_trains():
    stored = json.loads((ROOT / "tests" / "data" / "doctor_arith_demo.json").read_text())
    rewards = stored["metrics"]["reward"]
    assert len(rewards) == DEMO_STEPS
    assert round(sum(rewards[:10]) / 10, 2) == DEMO_REWARD_FROM
    assert round(sum(rewards[-10:]) / 10, 2) == DEMO_REWARD_TO


@pytest.mark.parametrize(
    "path", ["README.md", "docs/tutorial/first-run.md", "examples/arith-demo.yaml"]
)
def test_every_quote_is_the_promise(path):
    text = re.sub(r"\s*\n#?\s*", " ", (ROOT / path).read_text())
    quotes = QUOTE.findall(text)
    assert quotes, f"{path} quotes no demo reward"
    expected = (f"{DEMO_REWARD_FROM:.2f}", f"{DEMO_REWARD_TO:.2f}", str(DEMO_STEPS))
    assert set(quotes) == {expected}
    assert not re.search(r"0\.30 (->|to) 0\.54", text)  # the numbers of an older demo


def test_the_demo_preset_quotes_it():
    (demo,) = [p for p in PRESETS if p.name == "arith-demo"]
    assert DEMO_PROMISE in demo.description
