"""The run doctor's asynchrony rules (grpo/doctor/asynchrony.py) on crafted async/* and
log-prob gap series, worked by hand, and silent on a healthy async run's recorded steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo.doctor.asynchrony import GENERATOR_STARVED, LOGPROB_GAP, TRAINER_STARVED
from grpo.doctor.finding import Severity
from grpo.doctor.rule import Rule
from tests.doctor.doctor_series import (
    ROOT,
    Row,
    demo_spec,
    fields,
    first_verdict,
    steady,
    then,
    verdicts,
)

ASYNC_DEMO = ROOT / "tests" / "data" / "doctor_async_demo.json"
"""60 steps of examples/arith-demo.yaml with async_generation (max_staleness 4), trained by
grpo.train on 2 shared CPU cores: the trainer busy 1.0, the producer 0.6-0.8 over any 10
steady steps, the gap 0.09-0.15 nats per token over any 10 steps."""

SLOW_TRAINER = ROOT / "tests" / "data" / "doctor_async_slow_trainer.json"
"""40 steps of the same with num_iterations 4: the trainer busy 1.0, the producer 0.1-0.9 a
step (about a third over 10 steps), 3 batches queued ahead, every group 4 versions stale."""

ASYNC = {"async_generation": True, "max_staleness": 4, "max_steps": 60}


def async_spec(**changes: object):
    return demo_spec(**{**ASYNC, **changes})


def async_demo_rows(path: Path = ASYNC_DEMO) -> list[Row]:
    stored = json.loads(path.read_text())
    columns: dict[str, list[float]] = stored["metrics"]
    count = len(next(iter(columns.values())))
    return [(1 + i, {k: v[i] for k, v in columns.items()}) for i in range(count)]


def busy(trainer: float, generator: float, depth: float = 0.0) -> dict[str, float]:
    return {
        "async/trainer_busy": trainer,
        "async/generator_busy": generator,
        "async/queue_depth": depth,
        "async/dropped_stale": 0.0,
    }


ASYNC_RULES = [TRAINER_STARVED, GENERATOR_STARVED, LOGPROB_GAP]


@pytest.mark.parametrize("rule", ASYNC_RULES, ids=lambda r: r.id)
def test_each_asynchrony_rule_is_silent_on_a_healthy_async_run(rule: Rule) -> None:
    assert first_verdict(rule, async_spec(), async_demo_rows()) is None


def test_a_recorded_run_whose_trainer_is_slower_finds_the_producer_waiting() -> None:
    spec, rows = async_spec(num_iterations=4, max_steps=40), async_demo_rows(SLOW_TRAINER)
    step, verdict = first_verdict(GENERATOR_STARVED, spec, rows)
    assert step == 11 and verdict.severity == Severity.INFO  # the first full window, 2-11
    assert verdict.facts["async/queue_depth"] == 3.0
    assert fields(verdict) == {"max_staleness": 1, "num_iterations": 2}
    assert first_verdict(TRAINER_STARVED, spec, rows) is None
    assert first_verdict(LOGPROB_GAP, spec, rows) is None


def test_a_trainer_waiting_on_generation_is_info_at_half_and_a_warning_under_a_fifth() -> None:
    # step 1 (the first batch: every run waits) is left out; steps 2-6 busy 0.9, then 0.1
    rows = steady(1, **busy(0.0, 1.0))
    rows = then(rows, 5, **busy(0.9, 1.0))
    rows = then(rows, 10, **busy(0.1, 1.0))
    found = dict(verdicts(TRAINER_STARVED, async_spec(), rows))
    assert found[10] is None  # 9 steady steps: the window is not full
    # step 11: steps 2-11, (5 * 0.9 + 5 * 0.1) / 10 = 0.5 -> info
    assert found[11].severity == Severity.INFO
    assert found[11].facts["async/trainer_busy"] == pytest.approx(0.5)
    assert "waited for the producer's batches 50%" in found[11].message
    # step 16: steps 7-16 all 0.1 -> warning; the overlap gains at most 1 + 0.1
    assert found[16].severity == Severity.WARNING
    assert "at most 1.10x" in found[16].message
    assert fields(found[16]) == {"use_vllm": True, "vllm_mode": "server"}


def test_a_starved_trainer_on_a_vllm_server_is_told_to_push_weights_less_often() -> None:
    spec = async_spec(use_vllm=True, vllm_mode="server", weight_sync_steps=2,
                      generation_batch_size=64)  # fmt: skip
    _, verdict = first_verdict(TRAINER_STARVED, spec, steady(11, **busy(0.4, 1.0)))
    # 2 * 2 syncs: max_staleness 4 >= 4 - 1; 64 of 256 completions decoded at once -> 128
    assert fields(verdict) == {"generation_batch_size": 128, "weight_sync_steps": 4}


def test_a_producer_waiting_at_the_bound_is_told_a_smaller_max_staleness_costs_nothing() -> None:
    rows = steady(11, **busy(1.0, 0.4, depth=3.0))
    step, verdict = first_verdict(GENERATOR_STARVED, async_spec(num_iterations=2), rows)
    assert step == 11 and verdict.severity == Severity.INFO  # steps 2-11 at 0.4
    assert verdict.facts == pytest.approx(
        {"async/generator_busy": 0.4, "async/trainer_busy": 1.0, "async/queue_depth": 3.0}
    )
    assert "waits at max_staleness 4" in verdict.message
    assert fields(verdict) == {"max_staleness": 1, "num_iterations": 1}


def test_a_producer_idle_under_max_staleness_zero_is_told_to_sample_one_step_ahead() -> None:
    # taking turns, the two busy shares add up to 1: generation 0.15 of each step
    rows = steady(11, **busy(0.85, 0.15))
    _, verdict = first_verdict(GENERATOR_STARVED, async_spec(max_staleness=0), rows)
    assert verdict.severity == Severity.WARNING  # 0.15 <= 0.2
    assert "take turns" in verdict.message
    assert fields(verdict) == {"max_staleness": 1}


def test_both_sides_waiting_at_the_bound_are_told_a_larger_max_staleness() -> None:
    rows = steady(11, **busy(0.6, 0.45, depth=0.0))  # the trainer under 0.9 waits too
    _, verdict = first_verdict(GENERATOR_STARVED, async_spec(max_staleness=1), rows)
    assert verdict.severity == Severity.INFO
    assert fields(verdict) == {"max_staleness": 2}


def test_the_producer_idling_at_the_end_of_the_run_is_not_starved() -> None:
    # steps 2-50 at 0.6, then 51-60 at 0: steps 57-60 (after max_steps - max_staleness) have
    # nothing left to sample and are left out; the window at 56 is 4 * 0.6 + 6 * 0 = 0.24...
    rows = then(steady(50, **busy(1.0, 0.6)), 10, **busy(1.0, 0.0))
    found = dict(verdicts(GENERATOR_STARVED, async_spec(), rows))
    assert found[56] is not None  # ... which a real idle stretch at 51-56 is
    assert all(found[s] is None for s in range(2, 51))
    # the same run ending on its steady share: the last four idle steps say nothing
    rows = then(steady(56, **busy(1.0, 0.6)), 4, **busy(1.0, 0.0))
    assert first_verdict(GENERATOR_STARVED, async_spec(), rows) is None


def test_groups_dropped_for_staleness_are_a_warning_counted_over_the_window() -> None:
    rows = steady(2, **busy(1.0, 0.9))
    rows = then(rows, 1, **{"async/dropped_stale": 2.0})
    rows = then(rows, 2, **{"async/dropped_stale": 0.0})
    rows = then(rows, 1, **{"async/dropped_stale": 3.0})
    found = dict(verdicts(GENERATOR_STARVED, async_spec(weight_sync_steps=2), rows))
    assert found[2] is None and found[4] is None
    assert found[3].severity == Severity.WARNING and found[3].facts["async/dropped_stale"] == 2
    assert found[6].facts["async/dropped_stale"] == 5  # 2 + 3 within the last 10 steps
    assert fields(found[6]) == {"max_staleness": 6}  # 4 + weight_sync_steps 2


def gap(value: float) -> dict[str, float]:
    return {"generation/logprob_diff_mean": value}


def test_a_log_prob_gap_tripling_past_the_floor_warns() -> None:
    rows = then(steady(10, **gap(0.02), **{"async/staleness_mean": 4.0}), 10, **gap(0.08))
    step, verdict = first_verdict(LOGPROB_GAP, async_spec(), rows)
    # step 16: (4 * 0.02 + 6 * 0.08) / 10 = 0.056, 2.8x the first 10 steps' 0.02: not yet
    # step 17: (3 * 0.02 + 7 * 0.08) / 10 = 0.062, 3.1x and over 0.05: growing
    assert step == 17 and verdict.severity == Severity.WARNING
    assert verdict.facts["generation/logprob_diff_mean"] == pytest.approx(0.062)
    assert verdict.facts["logprob_gap_growth"] == pytest.approx(3.1)
    assert (
        verdict.facts["async/staleness_mean"] == 4.0 and "ever more off-policy" in verdict.message
    )
    assert fields(verdict) == {"max_staleness": 1, "learning_rate": 0.00015}


def test_a_log_prob_gap_growing_under_the_floor_is_noise() -> None:
    rows = then(steady(10, **gap(0.001)), 10, **gap(0.01))  # 10x, but 0.01 nats per token
    assert first_verdict(LOGPROB_GAP, async_spec(), rows) is None


def test_a_large_log_prob_gap_is_critical_whatever_its_trend() -> None:
    spec = demo_spec(use_vllm=True)  # colocated and synchronous: the weights move every step
    step, verdict = first_verdict(LOGPROB_GAP, spec, steady(10, **gap(0.6)))
    assert step == 10 and verdict.severity == Severity.CRITICAL
    assert verdict.facts["logprob_gap_growth"] == pytest.approx(1.0)
    assert "far outside PPO's clip range" in verdict.message
    assert "see the run's log for its weight pushes" in verdict.message
    assert "async/staleness_mean" not in verdict.facts  # a synchronous run reports none
    assert fields(verdict) == {}
    off = demo_spec(use_vllm=True, vllm_importance_sampling_correction=False)
    _, verdict = first_verdict(LOGPROB_GAP, off, steady(10, **gap(0.6)))
    assert fields(verdict) == {"importance_correction.enabled": True}
