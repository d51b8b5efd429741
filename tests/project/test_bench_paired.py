"""bench/paired.py: the vs-TRL headline is the median of per-step paired ratios."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.bench_module import load_bench


def paired() -> ModuleType:
    return load_bench("paired")


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
