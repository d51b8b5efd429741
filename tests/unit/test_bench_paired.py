"""bench/paired.py: the vs-TRL headline is the median of per-step paired ratios."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def paired() -> ModuleType:
    spec = importlib.util.spec_from_file_location("paired", ROOT / "bench" / "paired.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_paired_ratios_pair_step_by_step_and_refuse_unpaired_lists() -> None:
    ratios = paired().paired_ratios([1.0, 3.0, 2.0], [2.0, 4.0, 2.0])
    assert ratios == [0.5, 0.75, 1.0]
    with pytest.raises(ValueError, match="unpaired"):
        paired().paired_ratios([1.0], [1.0, 2.0])


def test_median_interval_brackets_the_median_and_is_seeded() -> None:
    values = [0.4, 0.5, 0.55, 0.6, 0.6, 0.62, 0.7, 0.9, 1.5]
    median, low, high = paired().median_with_interval(values)
    assert median == 0.6
    assert 0.4 <= low <= median <= high <= 1.5
    assert paired().median_with_interval(values) == (median, low, high)
    assert paired().median_with_interval([0.5] * 10) == (0.5, 0.5, 0.5)
