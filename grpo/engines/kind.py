"""What an engine kind is: one object per way of sampling rollouts, owning everything about
that way, as reward kinds own theirs (grpo/rewards/kind.py):

    is_available() -> bool                   whether this process can run it, asked without
                                             importing its engine (workers advertise it)
    check(spec, server) -> (field, why)|None at submit, in the API's process, and again
                                             before the run starts: what this server
                                             refuses (a vLLM server at a host it does not
                                             allow); pydantic has already checked the spec
    build(context, workdir) -> Engine        once per rank, on the worker: the engine
                                             (grpo/engines/engine.py), which imports what
                                             needs torch or vllm only then

grpo/engines/registry.py holds the kinds and picks a spec's kind from TRL's names
(use_vllm, vllm_mode). Imports without torch: the API runs `check`. Adding a kind: one
module for its engine, one EngineKind entry in the registry, and its tests.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo.spec import JobSpec
from grpo.spec.vllm import DEFAULT_VLLM_SERVER_HOSTS

if TYPE_CHECKING:
    from grpo.engines.engine import Engine


@dataclass(frozen=True)
class EngineServerFacts:
    """What a submit-time check may know of the server it runs on; the API fills it in from
    its Settings (GRPO_VLLM_SERVER_HOSTS), the worker and the trainer again from theirs."""

    vllm_server_hosts: tuple[str, ...] = DEFAULT_VLLM_SERVER_HOSTS


Check = Callable[[JobSpec, EngineServerFacts], "tuple[str, str] | None"]
"""(the spec's field at fault, why) for a refusal; None: this server takes the spec."""


@dataclass(frozen=True)
class EngineKind:
    """One kind of engine: its name, where it runs, its checks and its builder."""

    name: str
    """The kind's name (`native`, `vllm`, `vllm-server`): an engine's `name`."""
    listed_as: str
    """What a worker lists in GET /api/workers' `engines` when it can run this kind."""
    is_available: Callable[[], bool]
    """Whether this process can run the kind (a worker advertises `listed_as` only then)."""
    missing: str
    """Why a worker that does not list `listed_as` leaves a run of this kind queued."""
    check: Check
    """The submit-time check of a spec of this kind against the server's settings."""
    build: Callable[[Any, Path], Engine]
    """The engine, from the engine's context (grpo/engines/context.py) and the run's
    workdir; imports the engine's module (torch, vllm) only when called."""
    own_weights: bool = False
    """Whether the engine samples with the policy's own parameters (nothing to sync: its
    rollouts are never stale, and an asynchronous producer needs a copy of them)."""


def has_module(name: str) -> bool:
    """Whether module `name` is importable here (found, not imported)."""
    return importlib.util.find_spec(name) is not None


def always() -> bool:
    """For kinds every process can run."""
    return True


def no_check(spec: JobSpec, server: EngineServerFacts) -> tuple[str, str] | None:
    """For kinds whose specs this server cannot refuse once pydantic accepted them."""
    return None
