"""Step failures worded for users, and user_message's wording of every other exception
(grpo/failures.py): what the worker stores as a run's error and `grpo train` prints."""

import pytest
import torch

from grpo.failures import (
    Diverged,
    OutOfMemory,
    RewardFunctionError,
    is_out_of_memory,
    out_of_memory,
    user_message,
)
from grpo.spec import JobSpec

SPEC = JobSpec(num_generations=16, prompts_per_step=8, max_completion_length=1024)

CUDA_TEXT = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
    "of which 1.06 GiB is free."
)
CPU_TEXT = (
    "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
    "you tried to allocate 1099570348032 bytes. Error code 12 (Cannot allocate memory)"
)


@pytest.mark.parametrize(
    ("exc", "device", "expected"),
    [
        (
            torch.OutOfMemoryError(CUDA_TEXT),
            "cuda:0",
            "out of memory on cuda:0 at step 7 "
            "(tried to allocate 2.00 GiB): set micro_batch_size (unset: all 128 completions per "
            "pass; try 64) and generation_batch_size (unset: all 128 decoded at once; try 64), "
            "or lower num_generations (16), prompts_per_step (8) or max_completion_length (1024)",
        ),
        (
            RuntimeError(CPU_TEXT),
            "cpu",
            "out of memory on cpu at step 7 (tried to allocate 1024.1 GiB): set micro_batch_size",
        ),
        (MemoryError(), "cpu", "out of memory on cpu at step 7: set micro_batch_size"),
    ],
)
def test_out_of_memory_names_device_step_size_and_the_knobs(exc, device, expected):
    assert is_out_of_memory(exc)
    message = str(out_of_memory(exc, SPEC, step=7, device=device))
    assert message.startswith(expected)
    assert message.endswith("or enable gradient_checkpointing or lora")


@pytest.mark.parametrize(
    ("knobs", "expected"),
    [
        (
            dict(micro_batch_size=16, generation_batch_size=32),
            ": set micro_batch_size (now 16 completions per pass; try 8) and "
            "generation_batch_size (now 32 decoded at once; try 16), or lower num_generations",
        ),
        (
            dict(micro_batch_size=1, generation_batch_size=16),
            ": lower num_generations (16), prompts_per_step (8)",
        ),
        (
            dict(micro_batch_size=1, generation_batch_size=48),
            ": set generation_batch_size (now 48 decoded at once; try 16), or lower",
        ),
    ],
)
def test_out_of_memory_advice_halves_the_batching_knobs_that_can_shrink(knobs, expected):
    spec = SPEC.model_copy(update=knobs)
    assert expected in str(out_of_memory(MemoryError(), spec, step=1, device="cpu"))


def test_other_runtime_errors_are_not_out_of_memory():
    assert not is_out_of_memory(RuntimeError("expected scalar type Float but found Half"))


def test_a_located_reward_failure_names_step_and_prompt():
    failure = RewardFunctionError("accuracy", 5, ValueError("boom")).located(step=3, prompt_id="q9")
    assert (
        str(failure)
        == "reward function 'accuracy' failed at step 3 on prompt 'q9': ValueError: boom"
    )


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            OutOfMemory("out of memory on cpu at step 2: lower"),
            "out of memory on cpu at step 2: lower",
        ),
        (
            torch.OutOfMemoryError(CUDA_TEXT),
            "out of memory before training started: use a "
            "smaller model, lora, or a device with more free memory (CUDA out of memory.",
        ),
        (
            Diverged("NaN", step=4),
            "training diverged: loss is NaN at step 4; lower learning_rate",
        ),
        (OSError("model path /x not found"), "model could not be loaded: model path /x"),
        (ValueError("dataset is empty"), "dataset is empty"),
        (KeyError("x"), "KeyError: 'x'"),
    ],
)
def test_every_failure_is_worded_for_users_once(exc, expected):
    assert user_message(exc).startswith(expected)


def test_a_failure_message_never_carries_a_nul_the_store_would_refuse() -> None:
    message = user_message(ValueError("cannot load model 'a\x00b'"))
    assert "\x00" not in message and "a\\x00b" in message
