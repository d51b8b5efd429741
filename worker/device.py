"""The devices this worker holds, what it has free, and whether a job fits it.

A worker holds GPUs (`grpo worker --devices 0,1`, indices as this process sees them;
default all it sees) or, without CUDA, CPU slots (`--devices 4`; default one per CPU).
Holding GPUs narrows CUDA_VISIBLE_DEVICES to them, so the worker and the ranks it starts
see them as cuda:0..n-1 and a rank takes cuda:LOCAL_RANK. A job asking for more ranks than
the worker holds, a GPU it cannot see, or more free memory than it has, is left queued for
another worker.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.settings import get_settings
from grpo.engines.registry import worker_refusal
from grpo.parallel.threads import ThreadChoice, available_cpus
from grpo.spec import JobSpec


@dataclass(frozen=True)
class Devices:
    """What a worker holds: GPUs by the ids the machine gives them (CUDA_VISIBLE_DEVICES
    entries), or CPU slots 0..n-1; one rank of a run per device."""

    kind: Literal["cuda", "cpu"]
    ids: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def label(self) -> str:
        if self.kind == "cuda":
            return f"{self.count} GPU{'s' if self.count > 1 else ''} ({','.join(self.ids)})"
        return f"{self.count} CPU slot{'s' if self.count > 1 else ''}"


_held: dict[str, Devices] = {}
_threads: dict[str, ThreadChoice] = {}


def parse_devices(text: str | None, *, visible_gpus: tuple[str, ...], cpus: int) -> Devices:
    """The devices `--devices text` names on a machine that shows `visible_gpus` (the ids of
    cuda:0..n-1) and has `cpus` CPUs; raises ValueError saying what is wrong."""
    if text is None or not text.strip():
        if visible_gpus:
            return Devices("cuda", visible_gpus)
        return Devices("cpu", tuple(str(i) for i in range(cpus)))
    items = [item.strip() for item in text.split(",")]
    if not all(item.isdigit() for item in items):
        raise ValueError(
            f"--devices {text!r}: give device indices like 0,1,2,3 (on a machine without "
            "CUDA, a number of CPU slots or a list of CPU indices)"
        )
    indices = [int(item) for item in items]
    twice = sorted({i for i in indices if indices.count(i) > 1})
    if twice:
        raise ValueError(f"--devices {text!r}: {', '.join(map(str, twice))} given twice")
    if visible_gpus:
        return Devices(
            "cuda",
            tuple(visible_gpus[i] for i in _present(indices, len(visible_gpus), "GPU", text)),
        )
    if len(indices) == 1:  # a count of CPU slots
        if not 1 <= indices[0] <= cpus:
            raise ValueError(
                f"--devices {text!r}: give 1 to {cpus} CPU slots (this machine has no CUDA "
                f"and {cpus} CPUs)"
            )
        return Devices("cpu", tuple(str(i) for i in range(indices[0])))
    return Devices("cpu", tuple(str(i) for i in _present(indices, cpus, "CPU", text)))


def _present(indices: list[int], available: int, what: str, text: str) -> list[int]:
    missing = [i for i in indices if i >= available]
    if missing:
        sees = f"{what}s 0-{available - 1}" if available > 1 else f"{available} {what}"
        raise ValueError(
            f"--devices {text!r}: {what} {', '.join(map(str, missing))} is not on this machine, "
            f"which has {sees}"
        )
    return indices


def machine_devices(text: str | None) -> Devices:
    """parse_devices on this machine: the GPUs torch sees (without initialising CUDA, so
    CUDA_VISIBLE_DEVICES can still be narrowed) and the CPUs this process may run on."""
    import torch

    # CUDA_VISIBLE_DEVICES is the CUDA runtime's own variable
    visible = visible_ids(os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.device_count())
    return parse_devices(text, visible_gpus=visible, cpus=available_cpus())


def visible_ids(cuda_visible_devices: str | None, count: int) -> tuple[str, ...]:
    """The ids of the GPUs torch numbers cuda:0..count-1: CUDA_VISIBLE_DEVICES names them
    (indices or UUIDs), else they are the machine's first `count`."""
    named = [e.strip() for e in cuda_visible_devices.split(",")] if cuda_visible_devices else []
    return tuple(named[i] if i < len(named) else str(i) for i in range(count))


def hold_devices(devices: Devices) -> None:
    """Hold `devices` for the life of this worker; GPUs become its only visible ones."""
    _held["devices"] = devices
    if devices.kind == "cuda":  # read by CUDA at its start here, and inherited by the ranks
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices.ids)


def hold_threads(choice: ThreadChoice) -> None:
    """What apply_threads chose for this worker's runs, for its reports."""
    _threads["choice"] = choice


def held_threads() -> ThreadChoice | None:
    return _threads.get("choice")


def held_devices() -> Devices:
    """The devices this worker holds: those `hold_devices` was given, else the default."""
    if "devices" not in _held:
        _held["devices"] = machine_devices(None)
    return _held["devices"]


def device_label() -> str:
    import torch

    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return "cpu"


def free_memory_mb(device: str) -> int | None:
    """Free memory of a CUDA device, or available memory of the host for the CPU."""
    if device.startswith("cuda"):
        import torch

        index = int(device.split()[0].partition(":")[2] or 0)
        return int(torch.cuda.mem_get_info(index)[0] // 2**20)
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    return None


def fit_problem(spec: JobSpec, held: Devices, engines: Sequence[str] = ("native",)) -> str | None:
    """Why a worker holding `held` and able to run `engines` cannot run `spec`, or None
    when it can."""
    import torch

    if (refused := worker_refusal(spec, engines)) is not None:  # the spec's engine kind
        return refused
    if spec.resources.num_nodes > 1 and get_settings().worker_address is None:
        return (
            f"resources.num_nodes is {spec.resources.num_nodes} but this worker has no "
            "GRPO_WORKER_ADDRESS (the address other machines reach it by), so it takes no "
            "node of a run on several machines"
        )
    ranks = spec.resources.num_processes
    if ranks > held.count:
        return (
            f"resources.num_processes is {ranks} but this worker holds {held.label}: one rank "
            f"per device, so it waits for a worker holding at least {ranks}"
        )
    visible = torch.cuda.device_count()
    if spec.device.startswith("cuda"):
        index = int(spec.device.partition(":")[2] or 0)
        if index >= visible:
            sees = f"cuda:0..cuda:{visible - 1}" if visible else "no GPU"
            return f"device {spec.device} is not on this worker, which sees {sees}"
        device = f"cuda:{index}"
    else:
        device = "cuda:0" if spec.device == "auto" and visible else "cpu"
    need_gb = spec.resources.min_free_memory_gb
    if need_gb is None:
        return None
    # rank i takes cuda:i (its LOCAL_RANK), so each of them needs the memory
    gpus = [f"cuda:{i}" for i in range(ranks)] if ranks > 1 and device != "cpu" else [device]
    for each in gpus:
        free_mb = free_memory_mb(each)
        if free_mb is not None and free_mb < need_gb * 1024:
            return f"needs {need_gb:g} GiB free on {each}; this worker has {free_mb / 1024:.1f} GiB"
    return None
