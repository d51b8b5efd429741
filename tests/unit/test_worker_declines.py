"""A worker says once per run that it declines it, and remembers a bounded number of runs."""

from __future__ import annotations

from worker import job


def test_a_decline_is_said_once_and_the_memory_of_declines_is_bounded() -> None:
    assert job.is_first_decline("run-a") and not job.is_first_decline("run-a")
    for i in range(3 * job.DECLINES_REMEMBERED):
        job.is_first_decline(f"run-{i}")
    assert len(job._declined) == job.DECLINES_REMEMBERED
    assert job.is_first_decline("run-a")  # long forgotten: said again, once


def test_a_run_for_several_ranks_does_not_fit_a_one_process_worker() -> None:
    from grpo.spec import JobSpec
    from worker.device import fit_problem

    spec = JobSpec(prompts_per_step=2, resources={"num_processes": 2})
    assert "num_processes is 2; this worker runs one process" in (fit_problem(spec) or "")
    assert fit_problem(JobSpec(device="cpu")) is None
