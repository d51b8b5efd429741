"""A run's reward preflight: at its start, on rank 0 once the model is loaded, the run's own
rewards (as its Rewarder prepared them) score adversarial completions of its first
`reward_preflight_records` records (grpo/rewards/preflight.py, the probes of
`POST /api/rewards/preflight`). Each probe a function pays as well as a correct completion,
or fails on, is a line in the run's log at the run doctor's severity (a warning; info for a
hole of the weighted total alone, which earns nothing without the right answer), and the
report goes to the run's sinks (the worker stores its findings as the run doctor's:
worker/run_doctor.py).

Not for a run with tools: its rewards read trajectories (tool calls and results), which
the probes' plain completions are not. It never fails the run and delays it little: each
function has CALL_SECONDS a probe, no probe is begun past SECONDS (a record cut short is
left out, so every finding is a mean over whole records), and a failure of the preflight
itself is a line in the log. Knows nothing of HTTP, SQL or Celery.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence

from grpo.data.example import Example
from grpo.doctor.finding import Severity
from grpo.doctor.preflight import doctor_finding
from grpo.rewards.preflight import findings, probe_examples
from grpo.rewards.probes import probe_samples
from grpo.rewards.scoring import Rewarder
from grpo.rewards.trial import Trial
from grpo.rewards.trial_report import PreflightReport
from grpo.spec import JobSpec

SECONDS = 30.0
"""No probe is begun this long after the preflight started."""
CALL_SECONDS = 10.0
"""One function on one probe (a reward test's default `timeout_s`)."""
PREFIX = "reward preflight"


def preflight_rewards(
    spec: JobSpec,
    rewarder: Rewarder,
    examples: Sequence[Example],
    *,
    log: Callable[[str, str], None],
) -> PreflightReport | None:
    """The report of the spec's rewards on probes of its first records, each finding said
    in the log; None when the spec asks for none or the preflight itself failed (said)."""
    records = list(examples[: spec.reward_preflight_records])
    if not records:
        return None
    if spec.tools:
        log("info", f"{PREFIX}: not run: a tool run's rewards read trajectories, not the "
                    "probes' plain completions")  # fmt: skip
        return None
    try:
        deadline = time.monotonic() + SECONDS
        trial = Trial.of_rewarder(rewarder)
        scored = list(
            probe_examples(spec, records, trial, call_seconds=CALL_SECONDS, deadline=deadline)
        )
        whole = whole_records(spec, records, Counter(p.record for p in scored))
        probes = [p for p in scored if p.record in whole]
        found = findings(spec, probes)
    except Exception as exc:  # noqa: BLE001 - the preflight's failure is never the run's
        log("warning", f"{PREFIX}: could not probe the rewards ({type(exc).__name__}: {exc})")
        return None
    stopped = None
    if len(whole) < len(records):
        stopped = f"timeout: past {SECONDS:g} s after {len(whole)} of {len(records)} records"
    said = f"{len(found)} found" if found else "nothing found"
    cut = f" ({stopped})" if stopped else ""
    records_probed = f"{len(whole)} record{'' if len(whole) == 1 else 's'} probed"
    log("info", f"{PREFIX}: {records_probed}{cut}; {said}")
    for finding in found:  # at the doctor's severity: a hole of the total alone is info
        severity = doctor_finding(spec, finding, probes).severity
        log("warning" if severity == Severity.WARNING else "info", f"{PREFIX}: {finding.message}")
    return PreflightReport(records=len(whole), probes=probes, findings=found, stopped=stopped)


def whole_records(spec: JobSpec, records: list[Example], counts: Counter[int]) -> set[int]:
    """The records every probe of which was scored (not cut short at the deadline)."""
    length = spec.max_completion_length
    return {
        i
        for i, record in enumerate(records)
        if counts[i] == len(probe_samples(record, max_completion_length=length))
    }
