"""A generation worker on another machine than the training worker (issue 42 item 5), on
hosts made here (tests/hosts.py: network namespaces on a bridge, which share this machine's
filesystem but not its network): a training worker in host 1, `grpo worker --generation`
in host 2 with GRPO_WORKER_ADDRESS its host's address. A `vllm_mode: server` run with no
address trains on the server the generation worker starts on that address, and its weights
go over the network (the gloo push, grpo/engines/vllm_push.py), chosen by address: the
shared filesystem would have let a file through, which proves nothing about another machine.
One vLLM server start (one to three minutes on a 2-core CPU). A server on another host
without grpo's weight receiver (a plain `vllm serve`: played by a small HTTP server that
answers as vLLM 0.32 does to a worker method it lacks) fails the engine's start with one
line naming its URL and what to start instead. Needs root and iproute2.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from grpo.engines.vllm_push import is_this_machine
from grpo.engines.vllm_server import VllmServerError
from grpo.spec import JobSpec
from grpo.training.reach import RunReach
from grpo.training.trainer import TrainingLoop
from tests.engines.test_generation_workers import (
    server_processes,
    server_spec,
    start_generation_worker,
    wait_for_serving,
    wait_for_workers,
)
from tests.engines.test_vllm_server import CACHE
from tests.hosts import Network, host_env, hosts_and_api, start_host_worker
from tests.stack import Stack
from tests.worker.test_gang import logs_of, stop_workers
from tests.worker.test_ranks_service import wait_gone
from tests.worker.test_run_lifecycle import wait_for_final


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Network, Stack]]:
    with hosts_and_api(2, tmp_path_factory.mktemp("generation-hosts")) as (net, stack):
        yield net, stack


def test_a_host_tells_its_own_addresses_from_another_hosts(hosts: tuple[Network, Stack]) -> None:
    """The push path's choice (`is_this_machine`), run inside host 1 (a thread of this
    process in its network namespace): its own address and loopback are this machine;
    host 2's and the bridge's (this machine's) are not."""
    net, _ = hosts
    one, two = net.hosts
    asked = [one.address, "127.0.0.1", "localhost", two.address, net.gateway]
    assert [one.call(is_this_machine, h) for h in asked] == [True, True, True, False, False]
    # and on this machine's side of the bridge, the other way round for the bridge's address
    assert [is_this_machine(h) for h in (one.address, net.gateway)] == [False, True]


def test_a_run_trains_on_a_generation_worker_on_another_host_pushing_over_the_network(
    hosts: tuple[Network, Stack],
) -> None:
    net, stack = hosts
    trainer_host, server_host = net.hosts
    allowed = {"GRPO_VLLM_SERVER_HOSTS": server_host.address}
    workers: list[subprocess.Popen[bytes]] = []
    try:
        workers.append(start_host_worker(stack, net, trainer_host, "training", allowed))
        settings = {"GRPO_WORKER_ADDRESS": server_host.address, **allowed}
        workers.append(start_generation_worker(
            stack, extra_env=host_env(stack, net, server_host, settings),
            wrapper=server_host.prefix,
        ))  # fmt: skip
        server_host.wait_inside(workers[-1])
        with stack.client() as client:
            wait_for_workers(client)
            response = client.post("/api/runs", json=server_spec(stack, max_steps=2))
            assert response.status_code == 201, response.text
            run_id = response.json()["id"]
            serving = wait_for_serving(client, run_id, timeout=300)
            url = serving["url"]
            assert url.startswith(f"http://{server_host.address}:"), serving
            run = wait_for_final(client, run_id, timeout=900)
            assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
            said = [m for m in logs_of(client, run_id) if "weights go to" in m]
            assert len(said) == 1, said  # once, the network path, from host 1's address
            assert f"weights go to the vLLM server at {url} over the network" in said[0], said
            assert f"from {trainer_host.address}:" in said[0], said
            metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
            assert [m["step"] for m in metrics if m["step"] > 0] == [1, 2]
            for row in metrics[1:]:  # sampled after pushes: the server's log-probs, the gap
                assert row["metrics"]["generation/logprob_diff_max"] < 1e-3
            assert wait_gone(server_processes(url), timeout=60) == [], stack.logs()
    finally:
        stop_workers(workers)
    for host in net.hosts:  # nothing left in either host once its worker is gone
        assert host.leftovers() == [], host.name


PLAIN_VLLM = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Plain(BaseHTTPRequestHandler):  # vllm serve without --worker-extension-cls
    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer(200, {"data": [{"id": "builtin:small"}]} if self.path == "/v1/models" else {})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.answer(500, {"error": {  # vLLM 0.32's words, asked for a method it lacks
            "message": "Call to collective_rpc method failed: Worker failed with error "
            "''CPUWorker' object has no attribute 'grpo_is_receiver'', please check the stack "
            "trace above for the root cause", "type": "InternalServerError", "code": 500}})

    def log_message(self, *args):
        pass

server = HTTPServer((sys.argv[1], 0), Plain)
print(server.server_port, flush=True)
server.serve_forever()
"""


def test_a_server_on_another_host_without_the_receiver_is_one_clear_error(
    hosts: tuple[Network, Stack], tmp_path: Path
) -> None:
    """The trainer here (this machine: the bridge's side), the server in host 2."""
    net, _ = hosts
    host = net.hosts[1]
    server = host.popen([sys.executable, "-c", PLAIN_VLLM, host.address], stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None
        url = f"http://{host.address}:{int(server.stdout.readline())}"
        spec = JobSpec(model="builtin:small", use_vllm=True, vllm_mode="server",
                       vllm_server_base_url=url, vllm_server_timeout=60, device="cpu")  # fmt: skip
        reach = RunReach(vllm_server_hosts=(host.address,))
        with pytest.raises(VllmServerError) as failed:
            TrainingLoop(spec, workdir=tmp_path, cache_dir=CACHE, reach=reach)
        message = str(failed.value)
        assert message.startswith(f"the vLLM server at {url} is on another machine and has no "
                                  "weight receiver"), message  # fmt: skip
        assert "Start it with `grpo vllm-serve MODEL --host ADDRESS`" in message, message
        assert "grpo.engines.vllm_receiver.WeightReceiver" in message, message
    finally:
        server.kill()
        server.wait(10)
