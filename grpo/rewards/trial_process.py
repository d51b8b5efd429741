"""The scoring process of a reward test or a preflight: `python -m grpo.rewards.trial_process`.

The API starts one per request and hands it a ScoringJob (grpo/rewards/trial_report.py) as
JSON on stdin; it caps its own address space at the job's `memory_mb`, scores, and writes
one JSON line per result on stdout as it goes: a SampleResult per sample, or a ProbeResult
per probe then a line `{"findings": [...]}`. A process of its own, as a run's: a reward
that crashes, hangs or eats memory costs this process, never the API's; the API kills it
at its deadline and keeps the lines written by then. Knows nothing of HTTP servers, SQL or
Celery.
"""

from __future__ import annotations

import json
import resource
import sys
from typing import TextIO

from grpo.data.example import Example
from grpo.data.records import parse_record
from grpo.rewards.preflight import findings, probe_records
from grpo.rewards.trial import Sample, Trial, estimated_tokens
from grpo.rewards.trial_report import ProbeResult, ScoringJob
from grpo.spec import JobSpec


def main(stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> None:
    job = ScoringJob.model_validate_json(stdin.read())
    limit = job.memory_mb * 1024 * 1024
    # the soft limit only: a code reward's sandbox sets its own, which may be higher
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    if job.spec is not None:
        preflight(job, job.spec, stdout)
        return
    trial = Trial.of_entries(job.rewards, job.server)
    for sample in job_samples(job):
        result = trial.score(sample, answer_field=job.answer_field, call_seconds=job.call_seconds)
        print(result.model_dump_json(), file=stdout, flush=True)


def preflight(job: ScoringJob, spec: JobSpec, stdout: TextIO) -> None:
    """Each probe's line, and after each record's probes the findings so far (a process
    killed at its deadline has said what the records it probed show); `{"error": ...}`
    when the records do not load (a dataset gone since the spec was checked)."""
    probes: list[ProbeResult] = []
    try:
        for probe in probe_records(spec, job.records, job.server, call_seconds=job.call_seconds):
            if probes and probe.record != probes[-1].record:
                print_findings(spec, probes, stdout)
            probes.append(probe)
            print(probe.model_dump_json(), file=stdout, flush=True)
    except Exception as exc:  # noqa: BLE001 - told to the caller, who names the field
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:2000]}), file=stdout)
        return
    print_findings(spec, probes, stdout)


def print_findings(spec: JobSpec, probes: list[ProbeResult], stdout: TextIO) -> None:
    found = [f.model_dump(mode="json") for f in findings(spec, probes)]
    records = len({p.record for p in probes})
    print(json.dumps({"findings": found, "records": records}), file=stdout, flush=True)


def job_samples(job: ScoringJob) -> list[Sample]:
    """The job's samples as a worker's records (the API has checked them with the same
    parse_record)."""
    samples = []
    for i, given in enumerate(job.samples):
        columns = {k: v for k, v in given.items() if k not in ("completion", "num_tokens")}
        record = parse_record(
            columns, prompt_field="prompt", answer_field=job.answer_field, where=f"samples.{i}"
        )
        example = Example(
            id=f"sample-{i}", prompt=record.prompt, answer=record.answer, data=record.data
        )
        completion = str(given["completion"])
        tokens = given.get("num_tokens")
        count = tokens if isinstance(tokens, int) else estimated_tokens(completion)
        samples.append(Sample(example, completion, count))
    return samples


if __name__ == "__main__":
    main()
