"""The vLLM engine, colocated: one `vllm.LLM` per rank in the trainer's own process
(distributed_executor_backend="external_launcher", as TRL's colocate mode), serving the
step's rollouts and the held-out evaluation (Kwon et al. 2023, PagedAttention,
arXiv:2309.06180).

It starts from a copy of the policy written once to `workdir/vllm-model-rank<r>` (LoRA:
merged); after each optimizer step the new weights go in memory through the model
runner's `reload_weights` and the prefix cache is reset (else a prompt's KV computed under
the old weights is reused). Sampling follows the native engine's promises: every knob maps, the
model's EOS ids end a completion (kept in it), a stop string ends it as EOS does, and each
completion j of a group draws from its own seed derived from the group's seed, so what is
sampled does not depend on batching or on the number of ranks. vLLM's log-probs of its
sampled tokens (after temperature, `processed_logprobs`) go to `Rollout.sampling_logps`.
Imported only when a spec sets use_vllm: nothing else imports vllm.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from grpo.engines.context import EngineContext
from grpo.engines.engine import GenerationRequest
from grpo.engines.weights import policy_weights, save_engine_copy
from grpo.rollout.rollout import Rollout
from grpo.rollout.sampling import stream_seed
from grpo.spec.generation import Sampling


def completion_seed(group_seed: int, index: int) -> int:
    """Seed of completion `index` of the group seeded `group_seed`: one request per
    completion, so vLLM's draws depend on this seed alone (a request with n > 1 would
    draw in an order that depends on the batch)."""
    return stream_seed(group_seed, 1, index * 7_919, modulus=2**31 - 1)  # vLLM: < 2**31


class VllmEngine:
    """Samples with vLLM on the policy's device; `load_weights` after every step."""

    name = "vllm"

    def __init__(self, policy: EngineContext, workdir: Path) -> None:
        from vllm import LLM  # the optional dependency, imported by this engine alone

        self.policy, spec = policy, policy.spec
        self.is_sleepy = spec.vllm_enable_sleep_mode and policy.device.type == "cuda"
        if spec.vllm_enable_sleep_mode and not self.is_sleepy:
            policy.log("warning", "vllm_enable_sleep_mode ignored: sleep mode is CUDA only")
        if policy.device.type == "cpu":
            _check_cpu_head_size(policy)
        rank = int(os.environ.get("RANK", "0"))  # ranks may share the workdir
        copy = Path(workdir) / f"vllm-model-rank{rank}"
        model_dir = save_engine_copy(policy.model, policy.tokenizer, copy)
        started = time.perf_counter()
        policy.log("info", "starting the vLLM engine (the first start compiles: 10-60 s)")
        with _launcher_environment(), _torch_threads_kept():
            self.llm: Any = self._start(LLM, model_dir)
        policy.log("info", f"vLLM engine started in {time.perf_counter() - started:.0f} s")
        self.is_asleep = False
        self.is_stale_cache = False

    def _start(self, llm_class: Any, model_dir: Path) -> Any:
        """The vllm.LLM of this run's knobs over `model_dir`."""
        policy, spec = self.policy, self.policy.spec
        length = spec.vllm_max_model_length or spec.max_prompt_length + spec.max_completion_length
        sequences = spec.vllm_max_num_seqs or max(spec.completions_per_step, 1)
        dtype = torch.bfloat16 if policy.dtype == torch.bfloat16 else torch.float32
        is_sized = policy.device.type == "cpu" and not os.environ.get("VLLM_CPU_KVCACHE_SPACE")
        need = kv_cache_bytes(policy.model.config, sequences, length, dtype) if is_sized else None
        return llm_class(
            model=str(model_dir),
            distributed_executor_backend="external_launcher",
            dtype=str(dtype).removeprefix("torch."),
            seed=spec.seed,
            max_model_len=length,
            max_num_seqs=sequences,
            enforce_eager=spec.vllm_enforce_eager,
            gpu_memory_utilization=spec.vllm_gpu_memory_utilization,
            enable_sleep_mode=self.is_sleepy,
            enable_prefix_caching=True,
            logprobs_mode="processed_logprobs",
            **({} if need is None else {"kv_cache_memory_bytes": need}),
        )

    def generate(self, request: GenerationRequest) -> Rollout:
        from vllm import SamplingParams

        self._wake()
        prompts = prompt_rows(request.prompt_ids, request.prompt_mask)
        g = request.num_generations
        inputs, params = [], []
        for b, ids in enumerate(prompts):
            for j in range(g):
                seed = None if request.seeds is None else completion_seed(request.seeds[b], j)
                inputs.append({"prompt_token_ids": ids})
                params.append(
                    SamplingParams(**self._knobs(request.sampling, request.max_new_tokens, seed))
                )
        outputs = self.llm.generate(inputs, sampling_params=params, use_tqdm=False)
        rollout = self._rollout(request, [o.outputs[0] for o in outputs])
        if self.is_sleepy:
            self.llm.sleep(level=1)  # the update needs the memory; weights offloaded to CPU
            self.is_asleep = True
        return rollout

    def _knobs(self, sampling: Sampling, max_new_tokens: int, seed: int | None) -> dict[str, Any]:
        policy = self.policy
        return sampling_knobs(
            sampling, max_new_tokens, seed, eos=policy.eos_token_ids, stop=policy.spec.stop
        )

    def _rollout(self, request: GenerationRequest, completions: list[Any]) -> Rollout:
        return completions_rollout(
            request,
            self.policy.tokenizer.pad_token_id,
            tokens=[list(c.token_ids) for c in completions],
            logps=[_sampled_logps(c) for c in completions],
            is_truncated=[c.finish_reason == "length" for c in completions],
        )

    def load_weights(self, model: Any) -> None:
        """Push the policy's weights (LoRA merged) in memory; the prefix cache is reset
        before the next generation."""
        if self.is_asleep:
            self.llm.wake_up(tags=["weights"])
        weights = list(policy_weights(model))
        self.llm.collective_rpc(
            "reload_weights",
            kwargs={"weights_iterator": iter(weights), "is_checkpoint_format": True},
        )
        self.is_stale_cache = True

    def _wake(self) -> None:
        if self.is_asleep:
            self.llm.wake_up()
            self.is_asleep = False
        if self.is_stale_cache:
            self.llm.reset_prefix_cache()
            self.is_stale_cache = False

    def close(self) -> None:
        """Release the engine (once); later calls do nothing."""
        llm, self.llm = self.llm, None
        if llm is None:
            return
        shutdown = getattr(getattr(llm, "llm_engine", None), "shutdown", None)
        if callable(shutdown):
            shutdown()
        del llm


def sampling_knobs(
    sampling: Sampling, max_new_tokens: int, seed: int | None, *, eos: Sequence[int],
    stop: Sequence[str],
) -> dict[str, Any]:  # fmt: skip
    """vLLM's sampling parameters of one completion (SamplingParams here, the completions
    request's body in server mode): our knobs, our EOS ids (kept in the output) and stop
    strings (kept too), the sampled token's log-prob."""
    return {
        "n": 1,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k > 0 else -1,
        "min_p": sampling.min_p or 0.0,
        "repetition_penalty": sampling.repetition_penalty,
        "max_tokens": max_new_tokens,
        "stop_token_ids": list(eos),
        "stop": list(stop) or None,
        "include_stop_str_in_output": True,
        "skip_special_tokens": False,
        "logprobs": 0,
        "seed": seed,
    }


def completions_rollout(
    request: GenerationRequest, pad: int, *, tokens: list[list[int]], logps: list[list[float]],
    is_truncated: list[bool],
) -> Rollout:  # fmt: skip
    """Completions (their tokens, vLLM's log-prob of each, whether each ran out of tokens)
    as a Rollout, right-padded. No entropies: vLLM returns none, and a no-grad pass of the
    policy to get them cost as much as the generation itself (docs/how-to/vllm.md); the
    update's forward pass at these same weights gives them (grpo/training/update.py)."""
    device = request.prompt_ids.device
    width = max(1, max(len(row) for row in tokens))
    n = len(tokens)
    ids = torch.full((n, width), pad, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    sampled = torch.zeros((n, width))
    for i, (row, row_logps) in enumerate(zip(tokens, logps, strict=True)):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = 1
        sampled[i, : len(row)] = torch.tensor(row_logps, dtype=torch.float32)
    return Rollout(
        request.prompt_ids, request.prompt_mask, ids.to(device), mask.to(device),
        torch.tensor(is_truncated).to(device), None, sampling_logps=sampled.to(device),
    )  # fmt: skip


KV_BLOCK_TOKENS = 128
"""The CPU KV cache's block (vLLM's CPU default); each sequence may hold one part-filled."""


def kv_cache_bytes(config: Any, sequences: int, length: int, dtype: torch.dtype) -> int | None:
    """The KV cache `sequences` sequences of up to `length` tokens need at once (keys and
    values of every layer, whole blocks), plus one block of each per sequence: on CPU
    vLLM otherwise reserves vllm_gpu_memory_utilization (0.3) of the machine's RAM, about
    4 GiB a rank on 24 GiB, and warms the model up to measure it (slower starts). None for
    a config without the usual fields: vLLM's own sizing then."""
    try:
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        layers = int(config.num_hidden_layers)
    except AttributeError:
        return None
    per_token = 2 * layers * heads * head * torch.finfo(dtype).bits // 8
    blocks = sequences * (-(-length // KV_BLOCK_TOKENS) + 1)
    return int(blocks * KV_BLOCK_TOKENS * per_token)


def _check_cpu_head_size(policy: EngineContext) -> None:
    """vLLM's CPU attention has kernels for some head sizes only; another fails at the
    first generation deep inside vLLM, so it is refused here with the way out."""
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    config = policy.model.config
    head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    supported = CPUAttentionBackend.get_supported_head_sizes()
    if head not in supported:
        raise ValueError(
            f"use_vllm on CPU: vLLM's CPU attention has no kernel for {policy.spec.model}'s "
            f"head size {head} (it supports {supported}; builtin:tiny and builtin:tiny-arith "
            "have 16): set use_vllm false, or use a model such as builtin:small"
        )


def _sampled_logps(completion: Any) -> list[float]:
    """vLLM's log-prob of each sampled token (logprobs=0 returns just that one)."""
    entries = completion.logprobs or []
    return [
        float(step[token].logprob)
        for step, token in zip(entries, completion.token_ids, strict=True)
    ]


def prompt_rows(prompt_ids: Tensor, prompt_mask: Tensor) -> list[list[int]]:
    """Each prompt's tokens without its left padding."""
    return [
        ids[row.bool()].tolist()
        for ids, row in zip(prompt_ids.cpu(), prompt_mask.cpu(), strict=True)
    ]


@contextmanager
def _torch_threads_kept() -> Iterator[None]:
    """On the CPU, vLLM's worker (in this process: external_launcher) drops torch to 1
    thread for serving and replaces `torch.set_num_threads` by a no-op for the whole
    process; the engine would then sample, and the trainer train, on 1 thread whatever
    grpo/parallel/threads.py chose. Both come back when the engine has started: vLLM's
    forward passes then use the trainer's threads, like the native engine's."""
    set_threads, threads = torch.set_num_threads, torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads = set_threads
        torch.set_num_threads(threads)


@contextmanager
def _launcher_environment() -> Iterator[None]:
    """external_launcher reads the torch.distributed variables while the engine starts; a
    single process started without a launcher gets those of a world of one (a free local
    port) for that time only: left set, LOCAL_RANK would make later runs in this process
    (a worker's next job) look like launched ranks (grpo/parallel/launch.py is_launched)."""
    if "RANK" in os.environ and "MASTER_PORT" in os.environ:
        yield
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    defaults = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}  # fmt: skip
    added = [key for key in defaults if key not in os.environ]
    os.environ.update({key: defaults[key] for key in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)
