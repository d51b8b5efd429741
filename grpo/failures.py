"""Why training stopped, worded for the person who submitted the job.

Each StepFailure names the step and what to change; `user_message` words any exception out
of training, and is what the worker stores as a run's error and `grpo train` prints. Knows
nothing of HTTP, SQL or Celery.
"""

from __future__ import annotations

import re

from grpo.spec import JobSpec

_CPU_ALLOC_FAILED = "can't allocate memory"


class StepFailure(RuntimeError):
    """A step could not finish; the message is meant for the user as it is."""


class RewardFunctionError(StepFailure):
    """A reward function failed scoring completion `index` of the batch (None: the whole
    batch, as a plugin, an endpoint or a classifier scores it at once)."""

    def __init__(
        self, name: str, index: int | None, cause: BaseException, *, where: str = ""
    ) -> None:
        self.name, self.index, self.cause, self.where = name, index, cause, where
        super().__init__(self.describe(where))

    def describe(self, where: str) -> str:
        cause = f"{type(self.cause).__name__}: {self.cause}"
        return f"reward function {self.name!r} failed{where}: {cause}"

    def located(self, *, step: int, prompt_id: str | None) -> RewardFunctionError:
        """The same failure, naming the step and the prompt whose group was being scored
        (once: a failure already located keeps its place)."""
        if self.where:
            return self
        where = f" at step {step}" + (f" on prompt {prompt_id!r}" if prompt_id else "")
        return type(self)(self.name, self.index, self.cause, where=where)


class NoApplicableReward(RewardFunctionError):
    """Every reward function returned None for completion `index`: it has no reward at all."""

    def describe(self, where: str) -> str:
        return (
            f"no reward applies to completion {self.index} of the batch{where}: every function "
            f"({self.name}) returned null for it; add a function that scores such completions"
        )


class OutOfMemory(StepFailure):
    """The device ran out of memory during a step."""


class OutOfSpace(StepFailure):
    """A checkpoint could not be written: no space left on its disk (torch words this as
    "unexpected pos N vs M", its writer hiding the errno)."""


class Diverged(StepFailure):
    """The loss of a step is NaN or infinite: training has diverged."""

    def __init__(self, value: str, *, step: int) -> None:
        self.value, self.step = value, step
        super().__init__(
            f"training diverged: loss is {value} at step {step}; lower learning_rate, check "
            "the rewards, or use precision fp32"
        )


def user_message(exc: BaseException) -> str:
    """The one line a user sees for any exception out of training."""
    # stored as text: PostgreSQL refuses NUL, and a failure must always be storable
    return _worded(exc).replace("\x00", "\\x00")


def _worded(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, StepFailure):
        return text  # worded for users, with the step: out of memory, a reward, divergence
    if is_out_of_memory(exc):
        # outside a step: loading the model or the reference already did not fit
        return (
            f"out of memory before training started: use a smaller model, lora, or a device "
            f"with more free memory ({text.splitlines()[0]})"
        )
    if isinstance(exc, OSError) and "model" in text.lower():
        return f"model could not be loaded: {text}"
    if isinstance(exc, ValueError):
        return text  # our own checks word these for users already: a bad spec, no data
    return f"{type(exc).__name__}: {text}"


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA's OutOfMemoryError, Python's MemoryError, or the CPU allocator's refusal."""
    import torch  # here, so reward code can import this module without torch

    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    return isinstance(exc, RuntimeError) and _CPU_ALLOC_FAILED in str(exc)


def out_of_memory(exc: BaseException, spec: JobSpec, *, step: int, device: str) -> OutOfMemory:
    """What ran out, where, and the knobs that shrink a step's memory: the batching knobs
    first (they bound memory without changing the update), with the sizes that failed."""
    requested = re.search(r"[Tt]ried to allocate ([\d.]+) ?(\w+)", str(exc))
    detail = f" (tried to allocate {_readable(*requested.groups())})" if requested else ""
    return OutOfMemory(
        f"out of memory on {device} at step {step}{detail}: {_batching_advice(spec)}lower "
        f"num_generations ({spec.num_generations}), prompts_per_step ({spec.prompts_per_step}) "
        f"or max_completion_length ({spec.max_completion_length}), or enable "
        "gradient_checkpointing or lora"
    )


def _batching_advice(spec: JobSpec) -> str:
    """Halve micro_batch_size and generation_batch_size (whole groups) while they can shrink."""
    total, g = spec.completions_per_step, spec.num_generations
    knobs = []
    passes = spec.micro_batch_size or total
    if passes > 1:
        now = "unset: all" if spec.micro_batch_size is None else "now"
        knobs.append(f"micro_batch_size ({now} {passes} completions per pass; try {passes // 2})")
    decoded = spec.generation_batch_size or total
    if decoded > g:
        now = "unset: all" if spec.generation_batch_size is None else "now"
        smaller = max(g, decoded // 2 // g * g)
        knobs.append(f"generation_batch_size ({now} {decoded} decoded at once; try {smaller})")
    return f"set {' and '.join(knobs)}, or " if knobs else ""


def _readable(amount: str, unit: str) -> str:
    """CPU errors count bytes ('1099570348032 bytes'); CUDA's read '2.00 GiB' already."""
    if unit == "bytes" and amount.isdigit():
        return f"{int(amount) / 2**30:.1f} GiB"
    return f"{amount} {unit}"
