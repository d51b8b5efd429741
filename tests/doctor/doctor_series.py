"""Metric series for the doctor's tests: the healthy demo as it trained, and crafted ones."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import yaml

from grpo.doctor.finding import Verdict
from grpo.doctor.rule import Metrics, Rule
from grpo.spec import JobSpec

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "data" / "doctor_arith_demo.json"
"""The 300 steps of examples/arith-demo.yaml (seed 0, fp32) trained by grpo.Trainer, the
metrics the rules read, at 4 significant digits."""

Row = tuple[int, dict[str, float]]


def demo_spec(**changes: object) -> JobSpec:
    data = yaml.safe_load((ROOT / "examples" / "arith-demo.yaml").read_text())
    return JobSpec.model_validate({**data, **changes})


def demo_rows() -> list[Row]:
    stored = json.loads(DEMO.read_text())
    columns: dict[str, list[float]] = stored["metrics"]
    count = len(next(iter(columns.values())))
    first = stored["first_step"]
    return [(first + i, {k: v[i] for k, v in columns.items()}) for i in range(count)]


def steady(steps: int, **metrics: float) -> list[Row]:
    """`steps` rows (from step 1) of the same metrics."""
    return [(s, dict(metrics)) for s in range(1, steps + 1)]


def then(rows: list[Row], steps: int, **metrics: float) -> list[Row]:
    """`rows` followed by `steps` more rows, each the last row's metrics with `metrics` set."""
    last_step, last = rows[-1]
    return rows + [(last_step + i, {**last, **metrics}) for i in range(1, steps + 1)]


def verdicts(rule: Rule, spec: JobSpec, rows: list[Row]) -> Iterator[tuple[int, Verdict | None]]:
    """The rule's detector fed `rows` in order: each step with its verdict."""
    detector = rule.start(spec)
    assert detector is not None, f"{rule.id} does not apply to the spec"
    for step, metrics in rows:
        yield step, detector.observe(step, metrics)


def first_verdict(rule: Rule, spec: JobSpec, rows: list[Row]) -> tuple[int, Verdict] | None:
    for step, verdict in verdicts(rule, spec, rows):
        if verdict is not None:
            return step, verdict
    return None


def fields(verdict: Verdict) -> dict[str, object]:
    """The suggested changes as {field: value}."""
    return {s.field: s.value for s in verdict.suggestions}


def row_metrics(rows: list[Row]) -> list[Metrics]:
    return [m for _, m in rows]
