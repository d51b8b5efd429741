"""Turn exceptions from training into messages a user can act on."""

from __future__ import annotations

from grpo.failures import StepFailure, is_out_of_memory


def describe_error(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, StepFailure):
        return text  # worded for users, with the step: out of memory, a reward that raised
    if is_out_of_memory(exc):
        # outside a step: loading the model or the reference already did not fit
        return (
            f"out of memory before training started: use a smaller model, lora, or a device "
            f"with more free memory ({text.splitlines()[0]})"
        )
    if isinstance(exc, FloatingPointError):
        return f"training diverged: {text}"
    if isinstance(exc, FileNotFoundError | OSError) and "model" in text.lower():
        return f"model could not be loaded: {text}"
    if isinstance(exc, ValueError):
        return text  # our own checks word these for users already
    return f"{type(exc).__name__}: {text}"
