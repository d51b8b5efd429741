"""Engines are kinds in one registry (grpo/engines/registry.py), as reward kinds are: each
with its availability check, its submit-time check and its builder, chosen in one place
from TRL's names (use_vllm, vllm_mode); and what an engine, the rounds and a checkpoint
are given is a frozen context, never the trainer."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grpo.checkpoints.training_state import CheckpointContext, Resumed
from grpo.engines.context import EngineContext
from grpo.engines.kind import EngineKind, EngineServerFacts
from grpo.engines.registry import (
    ENGINE_KINDS,
    available_engines,
    build_engine,
    check_engine,
    engine_kind,
    engine_refusal,
    kind_of,
    worker_refusal,
)
from grpo.rollout.policy import PolicyView
from grpo.spec import JobSpec

HAS_VLLM = importlib.util.find_spec("vllm") is not None
SERVER = {"use_vllm": True, "vllm_mode": "server", "device": "cpu"}


def test_every_kind_is_an_entry_under_its_own_name() -> None:
    assert list(ENGINE_KINDS) == ["native", "vllm", "vllm-server"]
    assert all(isinstance(k, EngineKind) and k.name == n for n, k in ENGINE_KINDS.items())


def test_the_kind_is_chosen_from_trls_names() -> None:
    assert kind_of(JobSpec()).name == "native"
    assert kind_of(JobSpec(use_vllm=True, device="cpu")).name == "vllm"
    assert kind_of(JobSpec.model_validate(SERVER)).name == "vllm-server"
    assert kind_of(JobSpec()).own_weights  # native samples with the policy itself
    assert not kind_of(JobSpec(use_vllm=True, device="cpu")).own_weights


def test_an_unknown_kind_is_refused_naming_the_fields_that_choose_it() -> None:
    with pytest.raises(ValueError) as refused:
        engine_kind("sglang")
    message = str(refused.value)
    assert message.startswith("use_vllm and vllm_mode: no engine kind 'sglang'")
    assert "native, vllm, vllm-server" in message


def test_each_kinds_availability_check() -> None:
    assert ENGINE_KINDS["native"].is_available()
    assert ENGINE_KINDS["vllm"].is_available() is HAS_VLLM
    assert ENGINE_KINDS["vllm-server"].is_available() is HAS_VLLM  # waits for a vLLM worker
    assert available_engines() == (["native", "vllm"] if HAS_VLLM else ["native"])


def test_availability_is_asked_without_importing_an_engine() -> None:
    code = (
        "import sys; from grpo.engines.registry import available_engines; available_engines(); "
        "print(sorted(m for m in ('torch', 'vllm') if m in sys.modules))"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert out.stdout.strip() == "[]", out.stderr


def test_a_worker_without_the_kinds_engine_declines_naming_it() -> None:
    vllm = JobSpec(use_vllm=True, device="cpu")
    assert worker_refusal(JobSpec(), ["native"]) is None
    assert worker_refusal(vllm, ["native", "vllm"]) is None
    refused = worker_refusal(vllm, ["native"]) or ""
    assert refused.startswith("use_vllm is set but vLLM is not installed on this worker")
    assert worker_refusal(JobSpec.model_validate(SERVER), ["native"]) is not None


def test_the_submit_time_check_is_the_kinds() -> None:
    far = JobSpec.model_validate({**SERVER, "vllm_server_host": "10.0.0.9"})
    assert engine_refusal(JobSpec(), EngineServerFacts(())) is None  # native: nothing to refuse
    field, why = engine_refusal(far, EngineServerFacts()) or ("", "")
    assert field == "vllm_server_host" and "not an allowed vLLM server host" in why
    assert engine_refusal(far, EngineServerFacts(("10.0.0.9",))) is None
    with pytest.raises(ValueError, match="^vllm_server_host: host '10.0.0.9:8000' is not"):
        check_engine(far, EngineServerFacts())


def test_the_native_kind_builds_the_native_engine_from_its_context() -> None:
    from grpo.engines.native import NativeEngine

    context = EngineContext(
        JobSpec(device="cpu"), model=object(), tokenizer=object(), device=torch.device("cpu"),
        dtype=None, eos_token_ids=[0], stop_strings=None, log=lambda level, message: None,
    )  # fmt: skip
    engine = build_engine(context, Path("."))
    assert isinstance(engine, NativeEngine) and engine.policy is context


@pytest.mark.parametrize("context", [EngineContext, PolicyView, CheckpointContext, Resumed])
def test_the_contexts_parts_are_given_are_frozen(context: type) -> None:
    assert dataclasses.is_dataclass(context)
    assert context.__dataclass_params__.frozen  # type: ignore[attr-defined]
    fields = {f.name: None for f in dataclasses.fields(context)}
    instance = context(**fields)
    name = next(iter(fields))
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(instance, name, 1)
