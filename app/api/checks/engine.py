"""The check on a spec's engine that needs this server's settings, by its engine kind's own
check (grpo/engines/registry.py), which the worker and the trainer apply again before they
connect: a server-mode run's vLLM server must be at a host GRPO_VLLM_SERVER_HOSTS lists. A
refusal is a 422 naming the field (`vllm_server_base_url`, or `vllm_server_host` when the
URL is built from host and port).
"""

from __future__ import annotations

from app.api.checks.refusal import Problem, problem
from app.settings import Settings
from grpo.engines.kind import EngineServerFacts
from grpo.engines.registry import engine_refusal
from grpo.spec import JobSpec


def engine_problems(spec: JobSpec, settings: Settings) -> list[Problem]:
    server = EngineServerFacts(vllm_server_hosts=tuple(settings.vllm_server_host_list))
    refused = engine_refusal(spec, server)
    return [] if refused is None else [problem(*refused)]
