"""A doctor as plain JSON data and back: what lets the store diagnose a long run a stretch at
a time (app/store/findings.py), each stretch starting where the last one stopped.

The data holds every detector's windows, each rule's latest episode, the finished episodes
not yet settled (Doctor.settle) and the last EVIDENCE_STEPS steps' metrics: bounded, however
long the run. Restored, the doctor answers exactly what the one that was saved would have,
step for step. Only the code that saved a state reads it back: the state carries a hash of
this package's source and RULES_VERSION, and a state saved by other code, for rules that no
longer apply to the spec, or of another shape, restores as None (diagnose from the first
step again). Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

import hashlib
from collections import deque
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any

from grpo.doctor.asynchrony import BusyShares
from grpo.doctor.doctor import EVIDENCE_STEPS, Doctor, Episode
from grpo.doctor.finding import ExampleQuery, Severity, Suggestion, Verdict
from grpo.doctor.registry import RULES_BY_ID, RULES_VERSION
from grpo.doctor.rule import Rule
from grpo.doctor.windows import Baseline, Streak, Trend, Window
from grpo.spec import JobSpec

CLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        *(Window, Trend, Baseline, Streak, BusyShares),
        *(Verdict, Suggestion, ExampleQuery, Episode),
    )
}
"""What a detector or an episode may hold besides numbers, strings and containers."""
ENUMS: dict[str, type[Enum]] = {"Severity": Severity}


@cache
def code_hash() -> str:
    """The doctor's source, hashed: a state is read back only by the code that wrote it."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def state_of(doctor: Doctor) -> dict[str, Any]:
    """The doctor as JSON-able data (floats may be NaN or infinite: json's defaults keep them)."""
    return {
        "code": code_hash(),
        "rules_version": RULES_VERSION,
        "rules": [rule.id for rule, _ in doctor.detectors],
        "detectors": [_fields(detector) for _, detector in doctor.detectors],
        "episodes": [_encode(e) for e in doctor.episodes.values()],
        "finished": [_encode(e) for e in doctor.finished],
        "recent": [[step, dict(metrics)] for step, metrics in doctor.recent],
    }


def doctor_from(spec: JobSpec, state: dict[str, Any]) -> Doctor | None:
    """The doctor `state_of` saved, for `spec`; None when this code cannot restore it."""
    if state.get("code") != code_hash() or state.get("rules_version") != RULES_VERSION:
        return None
    doctor = Doctor(spec)
    if [rule.id for rule, _ in doctor.detectors] != state.get("rules"):
        return None  # the rules that apply to the spec changed since
    try:
        for (_, detector), saved in zip(doctor.detectors, state["detectors"], strict=True):
            fields = {name: _decode(value) for name, value in saved.items()}
            if set(fields) != set(vars(detector)) - {"spec"}:
                return None
            vars(detector).update(fields)
        episodes = [_decode(e) for e in state["episodes"]]
        doctor.finished = [_decode(e) for e in state["finished"]]
        doctor.recent = deque(
            ((int(step), dict(metrics)) for step, metrics in state["recent"]),
            maxlen=EVIDENCE_STEPS,
        )
    except (KeyError, TypeError, ValueError):
        return None
    if not all(isinstance(e, Episode) for e in [*episodes, *doctor.finished]):
        return None
    doctor.episodes = {e.rule.id: e for e in episodes}
    return doctor


def _fields(obj: object) -> dict[str, Any]:
    """An object's attributes but the spec, which the restoring side hands in again."""
    return {name: _encode(value) for name, value in vars(obj).items() if name != "spec"}


def _encode(value: Any) -> Any:
    if isinstance(value, Enum):  # first: a StrEnum is a str too
        return {"$": "enum", "class": type(value).__name__, "value": value.value}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Rule):
        return {"$": "rule", "id": value.id}
    if isinstance(value, deque):
        return {"$": "deque", "maxlen": value.maxlen, "items": [_encode(v) for v in value]}
    if isinstance(value, tuple):
        return {"$": "tuple", "items": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"$": "dict", "items": [[_encode(k), _encode(v)] for k, v in value.items()]}
    name = type(value).__name__
    if CLASSES.get(name) is type(value):
        return {"$": "object", "class": name, "fields": _fields(value)}
    raise TypeError(f"a doctor's state cannot hold a {name}")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    match value["$"]:
        case "enum":
            return ENUMS[value["class"]](value["value"])
        case "rule":
            return RULES_BY_ID[value["id"]]
        case "deque":
            return deque((_decode(v) for v in value["items"]), maxlen=value["maxlen"])
        case "tuple":
            return tuple(_decode(v) for v in value["items"])
        case "dict":
            return {_decode(k): _decode(v) for k, v in value["items"]}
        case "object":
            obj: object = object.__new__(CLASSES[value["class"]])
            vars(obj).update({k: _decode(v) for k, v in value["fields"].items()})
            return obj
    raise ValueError(f"not a doctor's state: {value['$']!r}")
