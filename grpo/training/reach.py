"""What a run may read and call beyond its spec: the service's datasets, the local folders
its paths may name, the hosts its `http` rewards and tools may call, the plugin folders and
this process's reward callables. The door that starts a run fills it in (the worker from the
operator's GRPO_* settings, `grpo train` from its options, the Python API from its
arguments) as part of its RunEnvironment (grpo/run/environment.py). Knows nothing of torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo.rewards.scoring import Rewarder
from grpo.rewards.trl_call import RewardFunction
from grpo.spec.rewards import RewardSpec
from grpo.spec.sources import LocalRoots
from grpo.spec.vllm import DEFAULT_VLLM_SERVER_HOSTS


@dataclass(frozen=True)
class RunReach:
    datasets_dir: Path | None = None
    """Where the service keeps uploaded datasets (None outside the service)."""
    model_roots: LocalRoots | None = None
    """Local folders a model path may name."""
    data_roots: LocalRoots | None = None
    """Local folders a data path may name."""
    reward_hosts: tuple[str, ...] = ()
    """The `host[:port]`s that `http` rewards may call."""
    token_envs: tuple[str, ...] = ()
    """Variables besides GRPO_REWARD_TOKEN_* an `http` reward's `token_env` may name."""
    reward_functions: Mapping[str, RewardFunction] | None = None
    """Callables of this process for the `python` entries naming them (the Python API)."""
    tool_hosts: tuple[str, ...] | None = None
    """Those `http` tools may call (None: the reward hosts)."""
    plugin_dirs: tuple[Path, ...] = ()
    """Folders whose files' functions `python` rewards and tools may name (GRPO_PLUGIN_DIRS,
    grpo/spec/plugins.py)."""
    vllm_server_hosts: tuple[str, ...] = DEFAULT_VLLM_SERVER_HOSTS
    """Where a server-mode run's vLLM server may be (GRPO_VLLM_SERVER_HOSTS; default
    loopback)."""

    def rewarder(
        self, rewards: Sequence[RewardSpec], *, cache_dir: Path, device: Any = "cpu"
    ) -> Rewarder:
        """`rewards` prepared as this run may run them: the one way a run, its held-out
        evaluation and a replay of its stored steps build their rewarder."""
        return Rewarder(
            rewards,
            device=device,
            reward_hosts=self.reward_hosts,
            token_envs=self.token_envs,
            cache_dir=cache_dir,
            model_roots=self.model_roots,
            functions=self.reward_functions,
            plugin_dirs=self.plugin_dirs,
        )
