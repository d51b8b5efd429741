"""What a reward kind is: one object per `name` of a reward entry (the discriminator of
grpo/spec/rewards.py's RewardSpec union) that owns everything about that kind of entry.

    check(entry, server) -> Refusal | None   at submit, in the API's process: what this
                                             server refuses (a host it does not allow, a
                                             plugin it lacks); pydantic has already
                                             checked the entry itself
    prepare(entry, run) -> Scorer            once per run, on the worker: load what the
                                             entry needs, fail early if it cannot
    scorer(batch, notes) -> scores           every step: one score per completion (None:
                                             does not apply), notes by completion index

grpo/rewards/registry.py finds a kind by the entry's `name`. A kind's module imports
without torch, since the API runs `check`; what needs torch, `prepare` imports. Adding a
kind: its entry class and union member in grpo/spec/rewards.py, one module here defining
its RewardKind, one line in the registry (a test fails while one is missing).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from grpo.rewards.batch import Notes, RewardBatch
from grpo.spec.sources import LocalRoots

E = TypeVar("E")

Scorer = Callable[[RewardBatch, Notes], list[float | None] | Awaitable[list[float | None]]]
"""A prepared entry: the batch's scores in batch order (group-major); it may add what it
has to say about a completion (a sandbox limit hit, a pattern timed out) to the notes, and
scalars and columns it logs. An `async def` scorer (an async `python` function) is awaited
concurrently with the step's other async ones."""


@dataclass(frozen=True)
class Refusal:
    """Why this server refuses an entry, for a 422 naming `rewards.<i>.<field>`."""

    field: str
    """The entry's field at fault; "" for the entry as a whole."""
    message: str


def _no_local_models(path: str) -> str | None:
    return "local model paths are not allowed here"


def _hub_unchecked(repo_id: str) -> str | None:
    return None


@dataclass(frozen=True)
class ServerFacts:
    """What a submit-time check may know of the server it runs on; the API fills it in
    from its Settings (GRPO_REWARD_HOSTS, GRPO_REWARD_TOKEN_ENVS, GRPO_MODEL_ROOTS,
    GRPO_CHECK_HUB_MODELS, GRPO_PLUGIN_DIRS)."""

    reward_hosts: tuple[str, ...] = ()
    token_envs: tuple[str, ...] = ()
    local_model_problem: Callable[[str], str | None] = _no_local_models
    """Why a local model path may not be used (None: it may), in the server's words."""
    hub_model_problem: Callable[[str], str | None] = _hub_unchecked
    """Why a Hugging Face model id cannot be loaded (None: it can, or the server does not
    ask: GRPO_CHECK_HUB_MODELS=false), in the server's words."""
    plugin_dirs: tuple[Path, ...] = ()
    """Plugin folders whose files' functions `python` entries may name (GRPO_PLUGIN_DIRS;
    grpo/spec/plugins.py)."""


@dataclass(frozen=True)
class RunFacts:
    """What preparing an entry on the worker may use: the run's device, the endpoint hosts
    and token variables the operator allows, the model cache, where local models may lie
    (None trusts the caller, as grpo.models.loading does) and the plugin folders."""

    cache_dir: Path
    device: Any = "cpu"
    reward_hosts: tuple[str, ...] = ()
    token_envs: tuple[str, ...] = ()
    model_roots: LocalRoots | None = None
    plugin_dirs: tuple[Path, ...] = ()
    """Plugin folders whose files' functions `python` entries may name (GRPO_PLUGIN_DIRS)."""


def no_server_check(entry: Any, server: ServerFacts) -> Refusal | None:
    """For kinds whose entries this server cannot refuse once pydantic accepted them."""
    return None


@dataclass(frozen=True)
class RewardKind(Generic[E]):
    """One kind of reward entry: its discriminator `name`, its check and its preparation."""

    name: str
    check: Callable[[E, ServerFacts], Refusal | None]
    prepare: Callable[[E, RunFacts], Scorer]
    needs_answer: bool = False
    """Whether its entries compare completions with the record's reference answer (a spec
    without `data.answer_field` is refused with them)."""
