"""Turn exceptions from training into messages a user can act on."""

from __future__ import annotations


def describe_error(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if "out of memory" in text.lower():
        return (
            "CUDA out of memory: lower num_generations, prompts_per_step or "
            f"max_completion_length, or use a larger GPU ({text.splitlines()[0]})"
        )
    if isinstance(exc, FloatingPointError):
        return f"training diverged: {text}"
    if isinstance(exc, FileNotFoundError | OSError) and "model" in text.lower():
        return f"model could not be loaded: {text}"
    if isinstance(exc, ValueError):
        return text  # our own checks word these for users already
    return f"{type(exc).__name__}: {text}"
