"""The check on a server-mode spec that needs this server's settings: its vLLM server must
be at a host GRPO_VLLM_SERVER_HOSTS lists, by grpo/spec/vllm.py's one rule, which the
trainer applies again before it connects. A refusal is a 422 naming the field
(`vllm_server_base_url`, or `vllm_server_host` when the URL is built from host and port).
"""

from __future__ import annotations

from app.api.checks.refusal import Problem, problem
from app.settings import Settings
from grpo.spec import JobSpec
from grpo.spec.vllm import vllm_server_refusal


def vllm_server_problems(spec: JobSpec, settings: Settings) -> list[Problem]:
    refused = vllm_server_refusal(spec, settings.vllm_server_host_list)
    return [] if refused is None else [problem(*refused)]
