"""A worker holds the devices it is started with, declines runs that need more ranks than
that, says once per run that it declines it, and remembers a bounded number of runs."""

from __future__ import annotations

import os
import re

import pytest
import torch

from grpo.spec import JobSpec
from worker import device, job
from worker.device import Devices, fit_problem, parse_devices, visible_ids


def test_a_decline_is_said_once_and_the_memory_of_declines_is_bounded() -> None:
    assert job.is_first_decline("run-a") and not job.is_first_decline("run-a")
    for i in range(3 * job.DECLINES_REMEMBERED):
        job.is_first_decline(f"run-{i}")
    assert len(job._declined) == job.DECLINES_REMEMBERED
    assert job.is_first_decline("run-a")  # long forgotten: said again, once


GPUS = ("0", "1", "2", "3")


@pytest.mark.parametrize(
    ("text", "gpus", "cpus", "kind", "ids"),
    [
        (None, GPUS, 16, "cuda", GPUS),  # default: every GPU it sees
        ("1,3", GPUS, 16, "cuda", ("1", "3")),
        ("1", ("GPU-a", "GPU-b"), 16, "cuda", ("GPU-b",)),  # ids as CUDA_VISIBLE_DEVICES names them
        (None, (), 2, "cpu", ("0", "1")),  # default without CUDA: one slot per CPU
        ("2", (), 4, "cpu", ("0", "1")),  # a count of CPU slots
        (" 0, 3 ", (), 4, "cpu", ("0", "3")),
    ],
)
def test_devices_a_worker_holds(
    text: str | None, gpus: tuple[str, ...], cpus: int, kind: str, ids: tuple[str, ...]
) -> None:
    assert parse_devices(text, visible_gpus=gpus, cpus=cpus) == Devices(kind, ids)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "gpus", "cpus", "says"),
    [
        ("0,x", GPUS, 16, "give device indices like 0,1,2,3"),
        ("-1", GPUS, 16, "give device indices"),
        ("0,,1", GPUS, 16, "give device indices"),
        ("1,2,1", GPUS, 16, "1 given twice"),
        ("2,4", GPUS, 16, "GPU 4 is not on this machine, which has GPUs 0-3"),
        ("0", (), 2, "give 1 to 2 CPU slots (this machine has no CUDA and 2 CPUs)"),
        ("3", (), 2, "give 1 to 2 CPU slots"),
        ("0,2", (), 2, "CPU 2 is not on this machine, which has CPUs 0-1"),
    ],
)
def test_devices_that_are_not_there_are_refused(
    text: str, gpus: tuple[str, ...], cpus: int, says: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_devices(text, visible_gpus=gpus, cpus=cpus)


def test_held_gpus_are_named_as_the_machine_names_them_and_become_the_only_visible_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert visible_ids(None, 2) == ("0", "1")
    assert visible_ids("2, 3", 2) == ("2", "3")  # this process sees the machine's GPUs 2 and 3
    seen = visible_ids("2,3", 2)
    assert parse_devices("1", visible_gpus=seen, cpus=8) == Devices("cuda", ("3",))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setattr(device, "_held", {})
    device.hold_devices(Devices("cuda", ("3",)))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "3"  # the worker's ranks inherit it
    assert device.held_devices() == Devices("cuda", ("3",))


def test_grpo_worker_refuses_bad_devices_at_start(capsys: pytest.CaptureFixture[str]) -> None:
    from worker import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--devices", "0,0"])
    assert exit_.value.code == 2
    assert "--devices '0,0': 0 given twice" in capsys.readouterr().err


def test_a_run_with_more_ranks_than_the_worker_holds_is_declined_saying_both() -> None:
    spec = JobSpec(device="cpu", prompts_per_step=4, resources={"num_processes": 4})
    problem = fit_problem(spec, Devices("cpu", ("0", "1")))
    assert problem is not None
    assert "resources.num_processes is 4 but this worker holds 2 CPU slots" in problem
    assert "at least 4" in problem
    assert fit_problem(spec, Devices("cpu", ("0", "1", "2", "3"))) is None
    assert fit_problem(JobSpec(device="cpu"), Devices("cpu", ("0",))) is None
    gpus = fit_problem(spec, Devices("cuda", ("0", "1")))
    assert "holds 2 GPUs (0,1)" in (gpus or "")


def test_a_run_of_several_nodes_is_declined_by_a_worker_without_an_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker that other machines cannot reach (no GRPO_WORKER_ADDRESS) leaves it queued
    for workers that have one, never trains half of it; one with an address takes a node
    (worker/gang.py)."""
    from app.settings import get_settings

    spec = JobSpec(device="cpu", prompts_per_step=2, resources={"num_nodes": 2})
    monkeypatch.setattr(get_settings(), "worker_address", None)
    problem = fit_problem(spec, Devices("cpu", ("0", "1")))
    assert "resources.num_nodes is 2 but this worker has no GRPO_WORKER_ADDRESS" in (problem or "")
    monkeypatch.setattr(get_settings(), "worker_address", "10.0.0.5")
    assert fit_problem(spec, Devices("cpu", ("0", "1"))) is None


def test_a_run_needing_more_free_memory_than_the_worker_has_is_declined() -> None:
    spec = JobSpec(device="cpu", resources={"min_free_memory_gb": 100_000})
    assert "needs 100000 GiB free on cpu" in (fit_problem(spec, Devices("cpu", ("0",))) or "")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_each_gpu_a_rank_takes_must_have_the_free_memory() -> None:
    hog = torch.empty(4 * 2**30, dtype=torch.uint8, device="cuda:1")  # cuda:1 has 4 GiB less
    free_0, free_1 = (torch.cuda.mem_get_info(i)[0] / 2**30 for i in range(2))
    need = (free_0 + free_1) / 2  # what rank 0's GPU has and rank 1's has not
    spec = JobSpec(prompts_per_step=2, resources={"num_processes": 2, "min_free_memory_gb": need})
    assert "free on cuda:1" in (fit_problem(spec, Devices("cuda", ("0", "1"))) or "")
    del hog


def test_a_worker_without_vllm_declines_use_vllm_runs() -> None:
    """The decline names the missing engine; a worker listing vllm takes the run, and a run
    without use_vllm fits a worker of the native engine alone."""
    held = Devices("cpu", ("0",))
    problem = fit_problem(JobSpec(use_vllm=True, device="cpu"), held, engines=["native"])
    assert problem is not None and "vLLM is not installed on this worker" in problem
    assert fit_problem(JobSpec(use_vllm=True, device="cpu"), held, ["native", "vllm"]) is None
    assert fit_problem(JobSpec(device="cpu"), held, engines=["native"]) is None


def test_this_worker_advertises_vllm_when_it_is_installed() -> None:
    import importlib.util

    from grpo.engines.registry import available_engines

    expected = ["native", "vllm"] if importlib.util.find_spec("vllm") else ["native"]
    assert available_engines() == expected
