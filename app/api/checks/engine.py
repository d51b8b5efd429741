"""The check on a spec's engine that needs this server's settings, by its engine kind's own
check (grpo/engines/registry.py), which the worker and the trainer apply again before they
connect: a server-mode run's vLLM server must be at a host GRPO_VLLM_SERVER_HOSTS lists. A
refusal is a 422 naming the field (`vllm_server_base_url`, or `vllm_server_host` when the
URL is built from host and port). A server-mode run with no address at all is started on a
generation worker's server (app/store/generation.py), which must be at an allowed host too:
with GRPO_VLLM_SERVER_HOSTS empty no worker could ever serve it, a 422 naming
`vllm_server_base_url`.
"""

from __future__ import annotations

from app.api.checks.refusal import Problem, problem
from app.settings import Settings
from grpo.engines.kind import EngineServerFacts
from grpo.engines.registry import engine_refusal
from grpo.spec import JobSpec
from grpo.spec.vllm import needs_generation_worker


def engine_problems(spec: JobSpec, settings: Settings) -> list[Problem]:
    server = EngineServerFacts(vllm_server_hosts=tuple(settings.vllm_server_host_list))
    if needs_generation_worker(spec):
        if server.vllm_server_hosts:
            return []  # the generation worker's URL is checked where the run starts
        return [
            problem(
                "vllm_server_base_url",
                "is not set, and no generation worker could start a vLLM server for the run: "
                "GRPO_VLLM_SERVER_HOSTS is empty (no server mode on this service); give it "
                "hosts, or train with vllm_mode colocate",
            )
        ]
    refused = engine_refusal(spec, server)
    return [] if refused is None else [problem(*refused)]
