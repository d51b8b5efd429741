"""One source for what the demo promises (grpo/spec/demo.py): ranges, as the numbers differ
from machine to machine (issue 44), that hold the demo's own 300 recorded steps; every place
that quotes them quotes the same, and none promises a single value or "under a minute"."""

import json
import re
from pathlib import Path

import pytest

from app.api.routes.presets import PRESETS
from grpo.spec.demo import (
    DEMO_PROMISE,
    DEMO_REWARD_FROM,
    DEMO_REWARD_TO,
    DEMO_SECONDS,
    DEMO_STEPS,
    DEMO_TIME,
)

ROOT = Path(__file__).resolve().parents[2]
RANGE = r"(0\.\d+)-(0\.\d+)"
QUOTE = re.compile(rf"reward\s+{RANGE}\s*->\s*{RANGE}\s+over\s+(\d+)\s+steps")
ONE_VALUE = re.compile(r"reward\s+0\.\d+\s*->\s*0\.\d+\s+over")
"""A promise of single numbers, as the README once made (0.31 -> 0.58)."""


def test_the_recorded_demo_falls_in_the_promise() -> None:
    stored = json.loads((ROOT / "tests" / "data" / "doctor_arith_demo.json").read_text())
    rewards = stored["metrics"]["reward"]
    assert len(rewards) == DEMO_STEPS
    low, high = DEMO_REWARD_FROM
    assert low <= round(sum(rewards[:10]) / 10, 2) <= high
    low, high = DEMO_REWARD_TO
    assert low <= round(sum(rewards[-10:]) / 10, 2) <= high
    seconds = sum(stored["metrics"]["time/step"])  # steps alone, without the model's load
    assert seconds <= DEMO_SECONDS[1]


@pytest.mark.parametrize(
    "path", ["README.md", "docs/tutorial/first-run.md", "examples/arith-demo.yaml"]
)
def test_every_quote_is_the_promise(path: str) -> None:
    text = re.sub(r"\s*\n#?\s*", " ", (ROOT / path).read_text())
    quotes = QUOTE.findall(text)
    assert quotes, f"{path} quotes no demo reward"
    expected = (
        *(f"{v:.2f}" for v in DEMO_REWARD_FROM),
        *(f"{v:.2f}" for v in DEMO_REWARD_TO),
        str(DEMO_STEPS),
    )
    assert set(quotes) == {expected}
    assert not ONE_VALUE.search(text)
    assert DEMO_TIME.removesuffix(" on 2 CPU cores") in text


def test_nothing_promises_the_demo_in_under_a_minute() -> None:
    pages = [ROOT / "README.md", ROOT / "examples" / "arith-demo.yaml"]
    pages += sorted((ROOT / "docs").rglob("*.md"))
    said = [p.relative_to(ROOT) for p in pages if "under a minute" in p.read_text()]
    assert said == []


def test_the_demo_preset_quotes_it() -> None:
    (demo,) = [p for p in PRESETS if p.name == "arith-demo"]
    assert DEMO_PROMISE in demo.description
    assert DEMO_TIME in demo.title
