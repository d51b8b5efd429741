"""The vLLM engine in server mode: generation on vLLM's own OpenAI-compatible server in
another process (`grpo vllm-serve MODEL`, or any `vllm serve` started with
VLLM_SERVER_DEV_MODE=1 and `--logprobs-mode processed_logprobs`), as TRL's server mode since
v1.11.

Sampling keeps the colocated engine's promises (grpo/engines/vllm.py): one completions
request per completion, seeded from its group's seed, so what is sampled does not depend
on batching; the model's EOS ids and stop strings end it and are kept; vLLM's log-prob of
each sampled token comes back per token (`logprobs: 0`, processed) and the token ids
themselves (`return_token_ids`). After each update the weights are pushed
(grpo/engines/vllm_push.py: a file in /dev/shm when the server's host is this machine, a
gloo broadcast over the network otherwise, which needs `grpo vllm-serve`'s worker
extension), the prefix cache is reset, and the policy version goes up by one. A server
that stops answering fails the call within vllm_server_timeout, naming its URL: a lost
connection at once, a server that no longer answers its health check once it has been
silent that long. Its host is one the operator allows (GRPO_VLLM_SERVER_HOSTS):
the trainer checks that before it starts the engine (the `vllm-server` kind's check,
grpo/engines/registry.py). HTTP only (httpx); never imports vllm.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from torch import Tensor

from grpo.engines.context import EngineContext
from grpo.engines.engine import GenerationRequest
from grpo.engines.vllm import completion_seed, completions_rollout, prompt_rows, sampling_knobs
from grpo.engines.vllm_push import GlooPush, is_this_machine, push_directory, push_file
from grpo.engines.vllm_receiver import RECEIVER
from grpo.engines.weights import policy_weights
from grpo.failures import StepFailure
from grpo.rollout.rollout import Rollout

HEALTH_EVERY_S = 2.0
"""How often a call in flight checks that the server still answers."""
MAX_REQUESTS_IN_FLIGHT = 64
"""Completions requests sent at once (vLLM batches them itself, up to its max_num_seqs)."""


def lost_words(url: str) -> tuple[str, str]:
    """How a VllmServerError says the server at `url` was lost: gone, or stopped answering.
    The worker reads them in a failed rank's message to hand the run back rather than fail
    it (worker/placement.py's is_server_lost); a refusal is worded otherwise."""
    return f"the vLLM server at {url} is gone", f"the vLLM server at {url} stopped answering"


class VllmServerError(StepFailure):
    """The vLLM server did not answer, or refused a call; the message names its URL."""


class VllmServerEngine:
    """Samples on a vLLM server; `load_weights` pushes the policy to it (version + 1)."""

    name = "vllm-server"

    def __init__(self, policy: EngineContext) -> None:
        self.policy, spec = policy, policy.spec
        self.url, self.timeout_s = spec.vllm_server_url, spec.vllm_server_timeout
        self.http = httpx.Client(base_url=self.url, timeout=httpx.Timeout(None, connect=10.0))
        self.pool = ThreadPoolExecutor(MAX_REQUESTS_IN_FLIGHT, thread_name_prefix="vllm-server")
        self.directory: Path | None = None
        self.policy_version = 0
        """Pushes since the run's start; 0: the weights the run started from."""
        policy.log("info", f"waiting for the vLLM server at {self.url} (vllm_mode server)")
        try:
            self._wait_until_up()
            self.model_name = self._call("GET", "/v1/models")["data"][0]["id"]
            self.push_weights = self._push_path()
            self._push(policy.model)  # the server may hold other weights (a checkpoint, a base)
        except BaseException:
            self.close()
            raise
        policy.log("info", f"vLLM server at {self.url} serves {self.model_name}; weights pushed")

    def generate(self, request: GenerationRequest) -> Rollout:
        prompts = prompt_rows(request.prompt_ids, request.prompt_mask)
        spec, g = self.policy.spec, request.num_generations
        bodies = []
        for b, ids in enumerate(prompts):
            for j in range(g):
                seed = None if request.seeds is None else completion_seed(request.seeds[b], j)
                knobs = sampling_knobs(
                    request.sampling, request.max_new_tokens, seed,
                    eos=self.policy.eos_token_ids, stop=spec.stop,
                )  # fmt: skip
                body = {"model": self.model_name, "prompt": ids, "return_token_ids": True}
                bodies.append(body | {k: v for k, v in knobs.items() if v is not None})
        choices = [r["choices"][0] for r in self._all("/v1/completions", bodies)]
        return completions_rollout(
            request,
            self.policy.tokenizer.pad_token_id,
            tokens=[list(c["token_ids"]) for c in choices],
            logps=[[float(x) for x in c["logprobs"]["token_logprobs"]] for c in choices],
            is_truncated=[c["finish_reason"] == "length" for c in choices],
        )

    def load_weights(self, model: Any) -> int:
        """Push the policy's weights (LoRA merged), reset the prefix cache (a prompt's KV
        computed under the old weights would be reused); the new policy version."""
        self._push(model)
        self.policy_version += 1
        return self.policy_version

    def _push(self, model: Any) -> None:
        self.push_weights(policy_weights(model))
        self._call("POST", "/reset_prefix_cache")

    def _push_path(self) -> Callable[[Iterable[tuple[str, Tensor]]], None]:
        """How the weights reach the server, said once in the run's log: a file when its
        host is this machine, the network (gloo) otherwise."""
        host = urlsplit(self.url).hostname or "127.0.0.1"
        if is_this_machine(host):
            directory = self.directory = push_directory()
            self.policy.log("info", f"weights go to the vLLM server at {self.url} as a file in "
                            f"{directory}: its host {host} is this machine")  # fmt: skip
            return lambda weights: push_file(self._rpc, weights, directory)
        self._require_receiver()
        try:
            gloo = GlooPush(self._rpc, host, self.timeout_s)
        except VllmServerError:
            raise
        except Exception as exc:
            raise VllmServerError(
                f"the vLLM server at {self.url} did not join the weight push's gloo group "
                f"within vllm_server_timeout ({self.timeout_s:g} s): the two machines must "
                "reach each other's TCP ports (the group's store on this one, gloo's on "
                f"both: docs/how-to/deployment.md) ({type(exc).__name__}: {exc})"
            ) from exc
        self.policy.log("info", f"weights go to the vLLM server at {self.url} over the network "
                        f"(a gloo group from {gloo.address}:{gloo.port}): its host {host} is "
                        "not this machine")  # fmt: skip
        return gloo.push

    def _require_receiver(self) -> None:
        """A server on another machine takes weights only through grpo's worker extension."""
        try:
            self._rpc("grpo_is_receiver", {})
        except VllmServerError as exc:
            if any(words in str(exc) for words in lost_words(self.url)):
                raise
            raise VllmServerError(
                f"the vLLM server at {self.url} is on another machine and has no weight "
                "receiver: a push over the network needs grpo's worker extension. Start it "
                "with `grpo vllm-serve MODEL --host ADDRESS` on its machine (or add `"
                f"--worker-extension-cls {RECEIVER}` to its `vllm serve`, with grpo installed "
                f"there). Its answer: {exc}"
            ) from exc

    def _rpc(self, method: str, kwargs: dict[str, str]) -> Any:
        body = {"method": method, "kwargs": kwargs, "timeout": self.timeout_s}
        return self._call("POST", "/collective_rpc", body)

    def close(self) -> None:
        """Stop asking the server (it is not ours to stop); remove the push directory."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.http.close()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not self._is_healthy():
            if time.monotonic() > deadline:
                raise VllmServerError(
                    f"no vLLM server answered at {self.url} within vllm_server_timeout "
                    f"({self.timeout_s:g} s): start one with `grpo vllm-serve MODEL`, or set "
                    "vllm_server_base_url to where it runs"
                )
            time.sleep(1.0)

    def _is_healthy(self) -> bool:
        try:
            return self.http.get("/health", timeout=min(HEALTH_EVERY_S, self.timeout_s)).is_success
        except httpx.HTTPError:
            return False

    def _all(self, path: str, bodies: list[dict[str, Any]]) -> list[Any]:
        """POST every body at once; their answers in order, or VllmServerError."""
        futures = [self.pool.submit(self._request, "POST", path, body) for body in bodies]
        self._watch(futures)
        return [f.result() for f in futures]

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        future = self.pool.submit(self._request, method, path, body)
        self._watch([future])
        return future.result()

    def _watch(self, futures: list[Future[Any]]) -> None:
        """Wait for the futures while the server answers its health check; a silence of
        vllm_server_timeout fails the call."""
        heard = time.monotonic()
        while True:
            done, pending = wait(futures, timeout=HEALTH_EVERY_S, return_when=FIRST_EXCEPTION)
            if not pending or any(f.exception() is not None for f in done):
                return
            if self._is_healthy():
                heard = time.monotonic()
            elif time.monotonic() - heard > self.timeout_s:
                for future in pending:
                    future.cancel()
                raise VllmServerError(
                    f"{lost_words(self.url)[1]} (no health check passed for "
                    f"vllm_server_timeout, {self.timeout_s:g} s)"
                )

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        try:
            response = self.http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise VllmServerError(
                f"{lost_words(self.url)[0]} ({type(exc).__name__}: {exc})"
            ) from exc
        if not response.is_success:
            raise VllmServerError(
                f"the vLLM server at {self.url} refused {method} {path}: "
                f"HTTP {response.status_code} {response.text[:300]}"
            )
        return response.json() if response.content else None
