"""Preflight: probe a spec's rewards with adversarial completions of its first records and
say which ones a function pays at least as well as a correct completion.

Each record's probes (grpo/rewards/probes.py) are scored as a reward test scores samples
(grpo/rewards/trial.py: the worker's scoring). A finding is a probe whose mean score on a
function is above zero and at or above the correct completion's (for the answer repeated
and a very long completion: their weighted total, as no one function need ask for reasoning
or brevity), or a probe that makes a function fail (a run would fail at the first step that
samples it). Records without a
reference answer get no correct completion, so only failures are found for them. Knows
nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from statistics import fmean

from grpo.data.example import Example
from grpo.data.loading import load_examples
from grpo.rewards.probes import HAS_ANSWER, probe_samples
from grpo.rewards.registry import kind_of
from grpo.rewards.trial import Trial
from grpo.rewards.trial_report import TOTAL, Finding, Probe, ProbeResult, ServerPaths
from grpo.spec import JobSpec
from grpo.spec.sources import LocalRoots

PROBE_WORDS: dict[Probe, str] = {
    "empty": "empty completions",
    "whitespace": "whitespace-only completions",
    "answer_only": "the answer alone, without the format,",
    "format_wrong_answer": "format-only completions (the format around a wrong answer)",
    "prompt_echo": "completions that echo the prompt",
    "answer_repeated": "the answer repeated",
    "truncated": "completions cut off at max_completion_length",
    "very_long": "completions as long as max_completion_length",
    "judge_injection": "an instruction to the judge ('ignore the rubric…')",
}
WITH_ANSWER_WORDS: dict[Probe, str] = {
    "answer_only": "without the expected format",
    "answer_repeated": "by repeating the answer instead of reasoning",
    "very_long": "however long the completion rambles",
}
TOTAL_ONLY: tuple[Probe, ...] = ("answer_repeated", "very_long")
"""Probes judged on the weighted total only: a single function need not ask for reasoning
or brevity, but some function of the spec should."""


def probe_records(
    spec: JobSpec, records: int, server: ServerPaths, *, call_seconds: float
) -> Iterator[ProbeResult]:
    """Every probe of the spec's first `records` records, scored by its rewards."""
    examples = load_examples(
        spec.data,
        datasets_dir=Path(server.datasets_dir) if server.datasets_dir else None,
        roots=LocalRoots(Path(server.local_path_base), tuple(Path(p) for p in server.data_roots)),
    )[:records]
    yield from probe_examples(
        spec, examples, Trial.of_entries(spec.rewards, server), call_seconds=call_seconds
    )


def probe_examples(
    spec: JobSpec,
    examples: Sequence[Example],
    trial: Trial,
    *,
    call_seconds: float,
    deadline: float = math.inf,
) -> Iterator[ProbeResult]:
    """Every probe of each of `examples`, scored by the trial's functions; no probe is
    begun past `deadline` (time.monotonic())."""
    for index, example in enumerate(examples):
        samples = probe_samples(example, max_completion_length=spec.max_completion_length)
        for probe, sample in samples.items():
            if time.monotonic() >= deadline:
                return
            result = trial.score(
                sample, answer_field=spec.data.answer_field, call_seconds=call_seconds
            )
            yield ProbeResult(record=index, answer=example.answer, probe=probe,
                              completion=sample.completion, result=result)  # fmt: skip


def findings(spec: JobSpec, probes: list[ProbeResult]) -> list[Finding]:
    """The holes the probes found: failures first, then per function the probes it pays as
    well as a correct completion, then the probes whose weighted total does (label TOTAL)."""
    found = failure_findings(probes)
    weights = {entry.label: entry.weight for entry in spec.rewards}
    correct = mean_scores(probes, "correct")
    if not correct:
        return found  # no reference answers: no yardstick
    correct_total = weighted(correct, weights)
    asked = sorted({p.probe for p in probes} - {"correct"}, key=order)
    for entry in spec.rewards:
        for probe in asked:
            if probe in TOTAL_ONLY or (probe in HAS_ANSWER and kind_of(entry).needs_answer):
                continue  # checking the answer is all an accuracy-like function claims
            score = mean_scores(probes, probe).get(entry.label)
            if score is not None and 0 < score and correct.get(entry.label, score) <= score:
                share = ratio(weighted(mean_scores(probes, probe), weights), correct_total)
                message = hole_sentence(probe, f"`{entry.label}`", score, share)
                found.append(Finding(label=entry.label, probe=probe, score=score,
                    correct_score=correct[entry.label], message=message))  # fmt: skip
    for probe in (p for p in asked if p in TOTAL_ONLY):
        total = weighted(mean_scores(probes, probe), weights)
        if 0 < total and correct_total <= total:
            message = hole_sentence(probe, "the weighted total", total, ratio(total, correct_total))
            found.append(Finding(label=TOTAL, probe=probe, score=total,
                                 correct_score=correct_total, message=message))  # fmt: skip
    return found


def weighted(scores: dict[str, float], weights: dict[str, float]) -> float:
    return sum(weights[label] * score for label, score in scores.items())


def ratio(total: float, correct_total: float) -> float | None:
    return total / correct_total if correct_total > 0 else None


def order(probe: Probe) -> int:
    return list(PROBE_WORDS).index(probe)


def mean_scores(probes: list[ProbeResult], probe: Probe) -> dict[str, float]:
    """Mean score per label of one probe over the records (labels that scored it)."""
    by_label: dict[str, list[float]] = {}
    for p in probes:
        if p.probe == probe:
            for label, score in p.result.scores.items():
                if score is not None:
                    by_label.setdefault(label, []).append(score)
    return {label: fmean(scores) for label, scores in by_label.items()}


def hole_sentence(probe: Probe, what: str, score: float, share: float | None) -> str:
    said = f"{PROBE_WORDS[probe]} score {score:.3g} on {what}"
    earned = "as much reward as" if share is None else f"{share:.0%} of the total reward of"
    if probe in WITH_ANSWER_WORDS:
        return f"{said}, {earned} a correct completion — earned {WITH_ANSWER_WORDS[probe]}"
    return f"{said} — the model can earn {earned} a correct completion without solving anything"


def failure_findings(probes: list[ProbeResult]) -> list[Finding]:
    """One finding per (function, probe) that failed, with the first failure's words."""
    found: dict[tuple[str, Probe], Finding] = {}
    for p in probes:
        for failure in p.result.failures:
            key = (failure.label, p.probe)
            if key in found or failure.kind == "cannot_load":
                continue
            found[key] = Finding(
                label=failure.label,
                probe=p.probe,
                score=None,
                correct_score=None,
                message=(
                    f"{PROBE_WORDS.get(p.probe, 'correct completions')} make `{failure.label}` "
                    f"fail ({failure.kind}: {failure.message}) — a run fails at the first "
                    "step that samples one"
                ),
            )
    return list(found.values())
