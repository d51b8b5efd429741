"""Each rule of the run doctor on crafted metric series: it fires where it should, with the
evidence and the suggestion expected, and stays silent on the healthy demo's own series."""

from __future__ import annotations

import math

import pytest

from grpo.doctor import RULES, RULES_BY_ID
from grpo.doctor.exploration import ENTROPY_COLLAPSE
from grpo.doctor.finding import Severity
from grpo.doctor.hacking import REWARD_HACKING
from grpo.doctor.length import LENGTH_DRIFT, TRUNCATION
from grpo.doctor.resources import GENERATION_BOUND, MEMORY_PRESSURE
from grpo.doctor.signal import NO_SIGNAL, REWARD_SCALE
from grpo.doctor.stability import CLIP_RATIO, GRAD_NORM_SPIKE, KL_RUNAWAY
from tests.doctor.doctor_series import demo_rows, demo_spec, fields, first_verdict, steady, then

# a spec under which every rule applies (reward_scale needs scale_rewards batch,
# generation_bound a generation_batch_size under B x G)
EVERY_RULE = {"scale_rewards": "batch", "generation_batch_size": 64, "num_iterations": 2}


def test_each_rule_is_found_by_its_own_id() -> None:
    assert len(RULES_BY_ID) == len(RULES)
    assert all(RULES_BY_ID[rule.id] is rule for rule in RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_every_rule_is_silent_on_the_healthy_demo(rule) -> None:
    assert first_verdict(rule, demo_spec(**EVERY_RULE), demo_rows()) is None


GROUPS = {"groups/all_pass": 0.0, "groups/all_fail": 0.0, "groups/mixed": 32.0}


def test_no_signal_fires_after_its_window_and_says_the_data_is_too_easy() -> None:
    rows = steady(5, frac_reward_zero_std=0.2, reward=0.5, **GROUPS)
    rows = then(rows, 5, frac_reward_zero_std=1.0, reward=1.0, **{"groups/all_pass": 32.0,
                                                                  "groups/mixed": 0.0})  # fmt: skip
    found = dict(_all(NO_SIGNAL, demo_spec(num_generations=2), rows))
    # window of 5: (0.2 * 3 + 1.0 * 2) / 5 = 0.52 at step 7 (info); 0.84 at step 9 (warning)
    assert found[6] is None and found[7].severity == Severity.INFO
    verdict = found[9]
    assert verdict.severity == Severity.WARNING
    assert verdict.facts["frac_reward_zero_std"] == pytest.approx(0.84)
    assert "too easy" in verdict.message
    assert fields(verdict) == {"num_generations": 8, "dynamic_sampling.enabled": True,
                               "data.source": None}  # fmt: skip
    assert verdict.examples is not None and verdict.examples.kind == "zero_std"


def test_no_signal_with_all_wrong_groups_says_too_hard_and_with_dynamic_sampling_more_rounds():
    rows = steady(6, frac_reward_zero_std=0.97, reward=0.01,
                  **{**GROUPS, "groups/all_fail": 31.0, "groups/mixed": 1.0})  # fmt: skip
    spec = demo_spec(num_generations=16, dynamic_sampling={"enabled": True})
    step, verdict = first_verdict(NO_SIGNAL, spec, rows)
    assert step == 5 and verdict.severity == Severity.CRITICAL
    assert "too hard" in verdict.message
    assert fields(verdict) == {"num_generations": 32, "dynamic_sampling.max_rounds": 6,
                               "data.source": None}  # fmt: skip


def test_no_signal_blames_the_policy_when_the_reward_fell_below_half_the_first_steps() -> None:
    rows = steady(1, frac_reward_zero_std=0.3, reward=0.32, **GROUPS)
    rows = then(rows, 5, frac_reward_zero_std=0.94, reward=0.02,
                **{"groups/all_fail": 30.0, "groups/mixed": 2.0})  # fmt: skip
    _, verdict = first_verdict(NO_SIGNAL, demo_spec(), rows)
    assert "the policy got worse" in verdict.message and verdict.suggestions == ()


def test_no_signal_notes_half_flat_groups_as_info() -> None:
    rows = steady(5, frac_reward_zero_std=0.6, reward=0.4, **GROUPS)
    assert first_verdict(NO_SIGNAL, demo_spec(), rows)[1].severity == Severity.INFO


def test_reward_scale_fires_on_a_tiny_but_nonzero_batch_std_under_batch_scaling() -> None:
    rows = steady(5, reward_std=0.004)
    step, verdict = first_verdict(REWARD_SCALE, demo_spec(scale_rewards="batch"), rows)
    assert step == 5 and fields(verdict) == {"scale_rewards": "none"}
    assert (
        first_verdict(REWARD_SCALE, demo_spec(scale_rewards="batch"), steady(9, reward_std=0.0))
        is None
    )
    assert REWARD_SCALE.start(demo_spec()) is None  # group scaling: not this rule's business


def test_entropy_collapse_needs_both_entropy_gone_and_a_flat_reward() -> None:
    start = steady(5, entropy=0.6, reward=0.3, **GROUPS)
    collapsed_flat = then(start, 20, entropy=0.03, reward=0.3)
    step, verdict = first_verdict(ENTROPY_COLLAPSE, demo_spec(), collapsed_flat)
    # the reward's two windows (10 + 10 steps) fill at step 20; entropy mean over its last 10
    assert step == 20 and verdict.metric == "entropy"
    assert verdict.facts["entropy_start"] == pytest.approx(0.6)
    assert fields(verdict) == {"temperature": 1.2, "epsilon_high": 0.28, "learning_rate": 0.00015,
                               "entropy_coef": 0.001}  # fmt: skip
    rising = start + [(6 + i, {**start[-1][1], "entropy": 0.03, "reward": 0.3 + 0.02 * i})
                      for i in range(30)]  # fmt: skip
    assert first_verdict(ENTROPY_COLLAPSE, demo_spec(), rising) is None
    solved = then(
        start, 30, entropy=0.03, reward=1.0, **{"groups/all_pass": 32.0, "groups/mixed": 0.0}
    )
    assert first_verdict(ENTROPY_COLLAPSE, demo_spec(), solved) is None


def test_kl_runaway_is_critical_when_the_window_mean_passes_one_nat() -> None:
    rows = then(steady(1, kl=0.0), 6, kl=4.0)
    step, verdict = first_verdict(KL_RUNAWAY, demo_spec(), rows)
    # window of 5 over steps 1..5: (0 + 4 * 4) / 5 = 3.2
    assert step == 5 and verdict.severity == Severity.CRITICAL
    assert verdict.facts["kl_mean"] == pytest.approx(3.2)
    assert fields(verdict) == {"learning_rate": 3e-5, "beta": 0.08}


def test_kl_runaway_warns_on_growth_past_the_floor_and_on_a_spike() -> None:
    growing = then(steady(20, kl=0.2), 5, kl=0.7)
    step, verdict = first_verdict(KL_RUNAWAY, demo_spec(num_iterations=4), growing)
    assert step == 25 and verdict.severity == Severity.WARNING and "grew" in verdict.message
    assert fields(verdict) == {"learning_rate": 7.5e-5, "beta": 0.08, "num_iterations": 2}
    spike = then(steady(20, kl=0.05), 1, kl=0.9)
    step, verdict = first_verdict(KL_RUNAWAY, demo_spec(), spike)
    assert step == 21 and "spiked" in verdict.message
    # early growth from 0 to the demo's 0.1-0.3 is not a runaway
    assert first_verdict(KL_RUNAWAY, demo_spec(), then(steady(5, kl=0.01), 10, kl=0.25)) is None


def test_clip_ratio_high_fires_on_a_window_over_a_fifth_of_tokens() -> None:
    rows = steady(5, **{"clip_ratio/region": 0.3})
    step, verdict = first_verdict(CLIP_RATIO, demo_spec(num_iterations=4), rows)
    assert step == 5 and fields(verdict) == {"learning_rate": 7.5e-5, "num_iterations": 2}
    assert first_verdict(CLIP_RATIO, demo_spec(), steady(9, **{"clip_ratio/region": 0.05})) is None


def test_grad_norm_spikes_are_info_then_a_warning_when_they_recur() -> None:
    rows = steady(20, grad_norm=1.0)
    for spike_at in (21, 31, 41):
        rows = then(rows, 1, grad_norm=15.0) if rows[-1][0] + 1 == spike_at else rows
        rows = then(rows, 9, grad_norm=1.0)
    found = {s: v for s, v in _all(GRAD_NORM_SPIKE, demo_spec(max_grad_norm=None), rows)}
    assert found[21].severity == Severity.INFO and found[22] is None
    assert found[41].severity == Severity.WARNING and found[42].severity == Severity.WARNING
    assert fields(found[41]) == {"max_grad_norm": 1.0, "learning_rate": 0.00015,
                                 "warmup_steps": 10}  # fmt: skip


def test_truncation_fires_with_the_limit_doubled_and_masking() -> None:
    rows = steady(5, **{"completions/clipped_ratio": 0.87})
    step, verdict = first_verdict(TRUNCATION, demo_spec(max_completion_length=2), rows)
    assert step == 5 and verdict.severity == Severity.CRITICAL
    assert fields(verdict) == {"max_completion_length": 4, "mask_truncated_completions": True}
    assert verdict.examples is not None and verdict.examples.kind == "truncated"
    assert (
        first_verdict(TRUNCATION, demo_spec(), steady(9, **{"completions/clipped_ratio": 0.1}))
        is None
    )


def test_length_drift_fires_on_tripling_and_on_shrinking_to_a_third() -> None:
    start = steady(5, **{"completions/mean_length": 100.0})
    step, verdict = first_verdict(
        LENGTH_DRIFT, demo_spec(), then(start, 10, **{"completions/mean_length": 400.0})
    )
    # the last 10 steps' mean at step 12: (3 * 100 + 7 * 400) / 10 = 310, over 3 x 100
    assert step == 12 and "grew" in verdict.message
    assert fields(verdict) == {"loss_type": "dr_grpo"}
    _, shrank = first_verdict(
        LENGTH_DRIFT, demo_spec(), then(start, 10, **{"completions/mean_length": 20.0})
    )
    assert "shrank" in shrank.message


def test_reward_hacking_against_eval_fires_at_the_eval_that_fell() -> None:
    rows = [(0, {"eval/accuracy": 0.34})]
    rows += [(s, {"reward": 0.5}) for s in range(1, 11)]
    rows[-1][1]["eval/accuracy"] = 0.28
    rows += [(s, {"reward": 0.7}) for s in range(11, 21)]
    rows[-1][1]["eval/accuracy"] = 0.20
    spec = demo_spec(rewards=[{"name": "format", "pattern": r"\d*[02468]"}],
                     eval={"every_steps": 10, "rewards": [{"name": "accuracy"}]})  # fmt: skip
    found = dict(_all(REWARD_HACKING, spec, rows))
    assert found[10] is None  # a 0.06 drop is within an evaluation's noise
    verdict = found[20]
    assert verdict.facts == pytest.approx(
        {"eval/accuracy": 0.2, "eval_best": 0.34, "reward_rise": 0.2}
    )
    assert verdict.examples is not None and verdict.examples.kind == "high_reward_fail"
    assert fields(verdict) == {"rewards": [{"name": "format", "pattern": r"\d*[02468]"},
                                           {"name": "accuracy"}]}  # fmt: skip


def test_reward_hacking_flags_a_saturated_format_reward_over_a_flat_accuracy() -> None:
    spec = demo_spec(rewards=[{"name": "accuracy"}, {"name": "format", "weight": 0.5}])
    start = steady(5, reward=0.3, **{"rewards/format/mean": 0.2, "rewards/accuracy/mean": 0.3})
    rows = then(start, 10, **{"rewards/format/mean": 0.98})
    step, verdict = first_verdict(REWARD_HACKING, spec, rows)
    # format's last 10 at step 14: (0.2 + 9 * 0.98) / 10 = 0.902, at last over 0.9
    assert step == 14 and verdict.metric == "rewards/format/mean"
    assert fields(verdict) == {
        "rewards": [{"name": "accuracy"}, {"name": "format", "weight": 0.125}]
    }
    learning = then(start, 10, **{"rewards/format/mean": 0.98, "rewards/accuracy/mean": 0.5})
    assert first_verdict(REWARD_HACKING, spec, learning) is None


def test_generation_bound_suggests_decoding_twice_as_many_at_once() -> None:
    spec = demo_spec(generation_batch_size=32)
    step, verdict = first_verdict(
        GENERATION_BOUND, spec, steady(10, **{"time/generate": 0.9, "time/step": 1.0})
    )
    assert step == 10 and verdict.severity == Severity.INFO
    assert fields(verdict) == {"generation_batch_size": 64}
    assert GENERATION_BOUND.start(demo_spec()) is None  # all B x G at once already


def test_memory_pressure_suggests_smaller_passes() -> None:
    rows = steady(3, **{"memory/peak_gb": 75.0, "memory/device_gb": 80.0})
    step, verdict = first_verdict(MEMORY_PRESSURE, demo_spec(), rows)
    assert step == 1 and verdict.severity == Severity.WARNING
    assert fields(verdict) == {"micro_batch_size": 128, "gradient_checkpointing": True,
                               "generation_batch_size": 128}  # fmt: skip
    assert (
        first_verdict(
            MEMORY_PRESSURE,
            demo_spec(),
            steady(3, **{"memory/peak_gb": 1.0, "memory/device_gb": 80.0}),
        )
        is None
    )


def test_a_rule_reads_nothing_it_does_not_find() -> None:
    """Step 0 (an evaluation alone) and unknown keys leave every detector quiet."""
    for rule in RULES:
        detector = rule.start(demo_spec(**EVERY_RULE))
        assert detector is not None
        assert detector.observe(0, {"eval/accuracy": 0.3, "something/else": math.nan}) is None


def _all(rule, spec, rows):
    from tests.doctor.doctor_series import verdicts

    return list(verdicts(rule, spec, rows))
