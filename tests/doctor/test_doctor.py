"""The run doctor's episodes: a finding opens, grows, escalates, resolves and reopens; the
live doctor and a diagnosis of the stored series agree; examples are picked from groups; a
doctor saved as JSON and restored goes on as if never stopped."""

from __future__ import annotations

import json
import math

from grpo.doctor import (
    RULES,
    CompletionView,
    Doctor,
    GroupView,
    Severity,
    diagnose,
    doctor_from,
    pick_examples,
    state_of,
)
from grpo.doctor.doctor import QUIET_STEPS, REFRESH_STEPS
from grpo.doctor.finding import ExampleQuery
from grpo.spec import JobSpec
from tests.doctor.doctor_series import Row, demo_rows, demo_spec, steady, then

CUT = "completions/clipped_ratio"


def test_the_healthy_demo_gets_no_finding_at_all() -> None:
    assert diagnose(demo_spec(), demo_rows()) == []


def test_a_finding_opens_escalates_resolves_and_is_written_when_it_changes() -> None:
    rows = then(steady(4, **{CUT: 0.0}), 6, **{CUT: 0.3})  # steps 5-10
    rows = then(rows, 6, **{CUT: 0.9})  # steps 11-16
    rows = then(rows, 8, **{CUT: 0.0})  # steps 17-24
    doctor = Doctor(demo_spec())
    written = {step: doctor.observe(step, m) for step, m in rows}
    # the 5-step mean reaches 0.2 at step 8 (0.24), 0.5 at step 12 (0.54); it is under 0.2
    # again from step 20 (0.18), and QUIET_STEPS quiet steps resolve the finding at step 22
    assert [s for s, found in written.items() if found] == [8, 12, 22]
    opened, escalated, resolved = written[8][0], written[12][0], written[22][0]
    assert (opened.id, opened.status, opened.severity) == ("truncation@8", "open", Severity.WARNING)
    assert (escalated.id, escalated.severity) == ("truncation@8", Severity.CRITICAL)
    assert (resolved.status, resolved.severity, resolved.last_step) == (
        "resolved",
        Severity.CRITICAL,
        19,
    )
    assert QUIET_STEPS == 3


def test_a_finding_that_returns_soon_is_reopened_under_its_id() -> None:
    rows = then(steady(5, **{CUT: 0.5}), 8, **{CUT: 0.0})  # open 5..5+, then resolved
    rows = then(rows, 5, **{CUT: 0.5})
    findings = diagnose(demo_spec(), rows)
    assert [(f.id, f.status) for f in findings] == [("truncation@5", "open")]


def test_a_long_episode_is_rewritten_ever_more_rarely() -> None:
    doctor = Doctor(demo_spec())
    writes = [s for s, m in steady(2000, **{CUT: 0.9}) if doctor.observe(s, m)]
    assert writes[:3] == [5, 5 + REFRESH_STEPS, 5 + 2 * REFRESH_STEPS]
    assert len(writes) < 30  # a quarter of the episode's length apart, once it is long


def test_the_live_doctor_ends_where_a_diagnosis_of_the_stored_series_does() -> None:
    rows = then(demo_rows()[:50], 20, kl=4.0, frac_reward_zero_std=0.97, **{"groups/all_fail": 31})
    doctor = Doctor(demo_spec())
    for step, metrics in rows:
        doctor.observe(step, metrics)
    assert doctor.findings() == diagnose(demo_spec(), rows)
    assert {f.rule for f in doctor.findings()} == {"kl_runaway", "no_signal"}


def test_a_finding_serialises_to_finite_json_with_its_evidence_values() -> None:
    rows = then(steady(10, grad_norm=1.0), 1, grad_norm=math.inf)
    (finding,) = diagnose(demo_spec(), rows)
    body = finding.as_dict()
    json.dumps(body, allow_nan=False)
    assert body["id"] == "grad_norm_spike@11" and "examples" not in body
    assert body["evidence"]["metric"] == "grad_norm"
    assert body["evidence"]["values"][:2] == [[1, 1.0], [2, 1.0]]  # the infinite step left out


def _group(index: int, rewards: list[float], *, cut: bool = False) -> GroupView:
    """A group of completions "7" (the answer is "12") scored by a format reward alone."""
    completions = [
        CompletionView(text="7", reward=r, rewards={"format": r}, is_truncated=cut) for r in rewards
    ]
    return GroupView(
        index=index, answer="12", rewards=rewards, is_dropped=False, completions=completions
    )


def test_examples_are_the_flat_the_cut_and_the_high_scoring_wrong_groups() -> None:
    groups = [_group(0, [1.0, 0.0]), _group(1, [1.0, 1.0]), _group(2, [0.0, 0.0], cut=True)]
    flat, _ = pick_examples(ExampleQuery("zero_std", 7), groups, demo_spec())
    assert [(g.step, g.index, g.note) for g in flat] == [
        (7, 1, "all 2 rewards 1"),
        (7, 2, "all 2 rewards 0"),
    ]
    cut, _ = pick_examples(ExampleQuery("truncated", 7), groups, demo_spec())
    assert [(g.index, g.note) for g in cut] == [(2, "2 of 2 cut at the limit")]
    spec = demo_spec(rewards=[{"name": "format", "pattern": "[0-9]+"}])  # no accuracy reward
    refs, completions = pick_examples(ExampleQuery("high_reward_fail", 7), groups, spec)
    assert [(c.group, c.text, c.reward, c.answer) for c in completions] == [
        (0, "7", 1.0, "12"),
        (1, "7", 1.0, "12"),
    ]
    assert [g.index for g in refs] == [0, 1]


def troubled_rows() -> list[Row]:
    """The demo with an async stretch (the trainer waiting on generation, the log-prob gap
    growing), then KL running away, completions cut at the limit on and off (episodes that
    resolve and open again later), a flat stretch and a falling eval."""
    rows = [(s, {**m, **_async_trouble(s)} if 100 <= s < 140 else m) for s, m in demo_rows()]
    rows = then(rows, 30, kl=4.0)
    rows = then(rows, 10, kl=0.1)
    for _ in range(5):
        rows = then(then(rows, 8, **{CUT: 0.8}), 30, **{CUT: 0.0})
    rows = then(rows, 25, frac_reward_zero_std=0.97, **{"groups/all_fail": 31.0})
    rows = then(rows, 25, frac_reward_zero_std=0.1, **{"groups/all_fail": 1.0})
    return [
        (step, {**m, "eval/accuracy": 0.9 - step / 1000} if step % 25 == 0 else m)
        for step, m in rows
    ]


def _async_trouble(step: int) -> dict[str, float]:
    return {
        "async/trainer_busy": 0.3, "async/generator_busy": 1.0, "async/queue_depth": 0.0,
        "async/dropped_stale": 0.0, "generation/logprob_diff_mean": 0.02 if step < 120 else 0.2,
    }  # fmt: skip


def every_rule_spec() -> JobSpec:
    """The demo's spec with every rule applying (as bench/doctor.py's)."""
    return demo_spec(
        scale_rewards="batch", generation_batch_size=64, num_iterations=2,
        eval={"every_steps": 25}, rewards=[{"name": "accuracy"}, {"name": "format", "weight": 0.1}],
    )  # fmt: skip


def test_a_doctor_saved_and_restored_anywhere_answers_as_the_one_never_stopped() -> None:
    spec, rows = every_rule_spec(), troubled_rows()
    unbroken, doctor = Doctor(spec), Doctor(spec)
    assert len(doctor.detectors) == len(RULES), "every rule's state is saved"
    settled = []
    for i, (step, metrics) in enumerate(rows):
        assert doctor.observe(step, metrics) == unbroken.observe(step, metrics), step
        settled += doctor.settle()
        if i % 7 == 3:  # saved as the store saves it: JSON text, NaN and all
            restored = doctor_from(spec, json.loads(json.dumps(state_of(doctor))))
            assert restored is not None, step
            doctor = restored
    found = sorted([*settled, *doctor.findings()], key=lambda f: (f.first_step, f.rule))
    assert found == sorted(diagnose(spec, rows), key=lambda f: (f.first_step, f.rule))
    assert len([f for f in settled if f.rule == "truncation"]) >= 3, "episodes were settled"
    assert len(doctor.finished) <= 1, "a settled doctor holds no old episodes"


def test_a_state_from_other_code_or_for_other_rules_restores_as_nothing() -> None:
    spec = every_rule_spec()
    doctor = Doctor(spec)
    for step, metrics in troubled_rows()[:40]:
        doctor.observe(step, metrics)
    state = json.loads(json.dumps(state_of(doctor)))
    assert doctor_from(spec, state) is not None
    assert doctor_from(spec, {**state, "code": "0" * 16}) is None  # the doctor's code changed
    assert doctor_from(spec, {**state, "rules_version": 0}) is None
    assert doctor_from(demo_spec(), state) is None  # fewer rules apply to this spec
    first, *rest = state["detectors"]
    broken = {**state, "detectors": [{**first, "extra": 1}, *rest]}  # of another shape
    assert doctor_from(spec, broken) is None
