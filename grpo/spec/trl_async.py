"""A TRL `AsyncGRPOConfig` recipe (trl.experimental.async_grpo, the config of TRL's
AsyncGRPOTrainer) on JobSpec's asynchronous fields: `async_generation: true`, its
`max_staleness` and `weight_sync_steps` by name, on the vLLM server AsyncGRPOTrainer always
generates on; each field of its own that we do not offer is listed with the reason.

TRL picks the asynchronous trainer by class, and a YAML does not name its class: a recipe
is read as an AsyncGRPOConfig when it sets one of the fields only that class has (or when
the caller says so: `grpo convert --async`). The fields it shares with GRPOConfig
(num_generations, epsilon, vllm_server_base_url, ...) are mapped by grpo/spec/trl_config.py
as for any recipe. Pure functions of plain dicts; imports neither torch nor the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SAME_NAME = ("max_staleness", "weight_sync_steps")
"""AsyncGRPOConfig fields whose JobSpec field has the same name and meaning."""
AUTO_INFLIGHT = -1
"""max_inflight_tasks' default: max_staleness steps' worth of samples in flight, which is
how far our producer samples ahead."""
TRL_SERVER_URL = "http://localhost:8000"
"""AsyncGRPOConfig's default vllm_server_base_url (GRPOConfig's is None: host and port)."""
WHOLE_PUSHES = "weights are pushed whole; delta-compressed sync is not offered"
WHY_NOT: dict[str, str] = {
    "max_inflight_tasks": (
        "the producer samples whole steps, at most max_staleness ahead (TRL's automatic "
        "value, -1); no other bound on requests in flight"
    ),
    "queue_maxsize": "the queue holds at most max_staleness + 1 steps' batches",
    "request_timeout": (
        "no per-request limit: a request runs while the server answers its health check and "
        "fails within vllm_server_timeout once it stops"
    ),
    "heartbeat_stale_after_s": (
        "the producer is a thread of the trainer's process: its failure is raised in the "
        "trainer at once, and a server that stops answering fails within vllm_server_timeout"
    ),
    "token_budget": "micro-batches are micro_batch_size completions, not a token budget",
    "fork_threshold_tokens": (
        "multi-turn tool rollouts are not sampled asynchronously yet (async_generation "
        "refuses tools)"
    ),
    "max_tool_calling_iterations": "async_generation refuses tools (sampled in turn only)",
    "delta_sync_enabled": WHOLE_PUSHES,
    "delta_sync_repo_id": WHOLE_PUSHES,
    "delta_sync_anchor_interval": WHOLE_PUSHES,
    "delta_sync_encoding": WHOLE_PUSHES,
}
"""Why an AsyncGRPOConfig field of its own has no JobSpec equivalent."""
SHARED_WITH_GRPO = ("max_tool_calling_iterations",)
"""Fields of WHY_NOT that GRPOConfig has too: they do not make a recipe an AsyncGRPOConfig."""
ONLY_ASYNC = (*SAME_NAME, *(key for key in WHY_NOT if key not in SHARED_WITH_GRPO))
"""Fields AsyncGRPOConfig has and GRPOConfig does not (in TRL's versions that had them): a
recipe that sets one is an AsyncGRPOConfig."""


def is_async_recipe(config: Mapping[str, Any]) -> bool:
    return any(key in config for key in ONLY_ASYNC)


def map_async(rest: dict[str, Any], spec: dict[str, Any], unmapped: dict[str, str]) -> None:
    """An AsyncGRPOConfig's own fields from `rest` into `spec` or `unmapped`, and the server
    mode its trainer always generates in (the shared fields are in `spec` already)."""
    spec["async_generation"] = True
    for key in SAME_NAME:
        if rest.get(key) is not None:
            spec[key] = rest.pop(key)
    if rest.get("max_inflight_tasks") == AUTO_INFLIGHT:
        del rest["max_inflight_tasks"]  # what our producer does
    if spec.get("vllm_mode", "server") != "server":
        unmapped["vllm_mode"] = (
            f"{spec['vllm_mode']!r}: AsyncGRPOTrainer generates on a vLLM server only, and "
            "async_generation cannot sample beside the update in the trainer's process"
        )
    spec.update(use_vllm=True, vllm_mode="server")
    if not {"vllm_server_base_url", "vllm_server_host", "vllm_server_port"} & spec.keys():
        spec["vllm_server_base_url"] = TRL_SERVER_URL
    for key in [k for k in rest if k in WHY_NOT]:
        unmapped[key] = WHY_NOT[key]
        del rest[key]
