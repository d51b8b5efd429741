"""The reward preflight of a run (grpo/run/preflight.py) as run-doctor findings: one per
probe that a function pays as well as a correct completion (`reward_hole`) or fails on
(`reward_fails`), with the probe's sentence, and the probe's completions and the correct
one of each record with their scores as the evidence.

These are not rules over the metric series (grpo/doctor/registry.py): they are found once,
before the first step, and stay open for the run (its rewards do not change). The store
keeps them apart from the series' findings, which a new diagnosis of the stored steps
rewrites (app/store/findings.py). Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from grpo.doctor.finding import CompletionRef, Evidence, Finding, Severity
from grpo.rewards.trial_report import TOTAL, PreflightReport, ProbeResult
from grpo.rewards.trial_report import Finding as ProbeFinding
from grpo.spec import JobSpec

REWARD_HOLE = "reward_hole"
REWARD_FAILS = "reward_fails"
PREFLIGHT_RULES = {REWARD_HOLE: "Reward hole", REWARD_FAILS: "Reward fails on a probe"}
"""Rule id -> title of the preflight's findings."""
LOUD_SHARE = 0.5
"""A hole earning at least this share of a correct completion's total reward is a warning
(an info below it: a format reward paying its share for the format is what it is for).
A hole of the weighted total alone (a correct answer repeated, or rambling to
max_completion_length, paid as well as a reasoned one) is an info whatever its share: it
earns nothing without the right answer, and most specs (the demo's accuracy alone) ask
nothing of length or reasoning; the preflight still says it."""
MAX_TEXT = 2_000
"""Characters of a probe's completion kept in the finding (a very long one is cut)."""


def preflight_findings(spec: JobSpec, report: PreflightReport) -> list[Finding]:
    """Each finding of the report as the doctor's."""
    return [doctor_finding(spec, found, report.probes) for found in report.findings]


def doctor_finding(spec: JobSpec, found: ProbeFinding, probes: Sequence[ProbeResult]) -> Finding:
    weights = {entry.label: entry.weight for entry in spec.rewards}
    labels = [entry.label for entry in spec.rewards]
    where = "total" if found.label == TOTAL else f"rewards.{labels.index(found.label)}"
    facts: dict[str, float | None] = {"score": found.score, "correct_score": found.correct_score}
    if found.score is None:
        rule, severity = REWARD_FAILS, Severity.WARNING
    else:
        rule, share = REWARD_HOLE, total_share(probes, found.probe, weights)
        loud = found.label != TOTAL and (share is None or share >= LOUD_SHARE)
        severity = Severity.WARNING if loud else Severity.INFO
        facts["share"] = share
    shown = [p for p in probes if p.probe in (found.probe, "correct")]
    return Finding(
        rule=rule,
        title=PREFLIGHT_RULES[rule],
        severity=severity,
        status="open",
        first_step=0,
        last_step=0,
        message=found.message,
        evidence=Evidence(
            metric="",
            values=[],
            facts={k: v for k, v in facts.items() if v is not None},
            completions=[probe_ref(p, weights) for p in shown],
        ),
        suggestions=(),
        subject=f"{where}.{found.probe}",
    )


def probe_ref(probe: ProbeResult, weights: dict[str, float]) -> CompletionRef:
    """A probe's completion with its scores; the total over the functions that scored it."""
    scores = probe.result.scores
    total = sum(weights[label] * s for label, s in scores.items() if s is not None)
    text = probe.completion
    cut = f", first {MAX_TEXT:,} of {len(text):,} characters" if len(text) > MAX_TEXT else ""
    failed = "".join(f"; `{f.label}` failed: {f.kind}" for f in probe.result.failures)
    return CompletionRef(
        step=0,
        group=probe.record,
        text=text[:MAX_TEXT],
        reward=total,
        rewards=dict(scores),
        answer=probe.answer,
        note=f"probe {probe.probe}, record {probe.record}{cut}{failed}",
    )


def total_share(
    probes: Sequence[ProbeResult], probe: str, weights: dict[str, float]
) -> float | None:
    """The probe's mean total reward over a correct completion's (None: that is not above 0)."""
    probe_total = mean_total([p for p in probes if p.probe == probe], weights)
    correct = mean_total([p for p in probes if p.probe == "correct"], weights)
    return probe_total / correct if correct > 0 else None


def mean_total(probes: Sequence[ProbeResult], weights: dict[str, float]) -> float:
    totals = [
        sum(weights[label] * s for label, s in p.result.scores.items() if s is not None)
        for p in probes
    ]
    return sum(totals) / len(totals) if totals else 0.0
