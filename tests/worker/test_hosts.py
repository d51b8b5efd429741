"""Hosts made here (tests/hosts.py), the base of issue 42's checks of one run on several
machines: two network namespaces on a bridge, the API bound to the bridge's address, the
machine's PostgreSQL and Redis reached from a host over the bridge only, and a real
`celery worker` inside a host training a run submitted through the API.

Needs root and iproute2, as CI has: a host that cannot be built fails the test with `ip`'s
own message; nothing here is skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.fixtures.service import tiny_spec
from tests.hosts import Network, hosts_and_api, network, start_host_worker
from tests.stack import REDIS_URL, Stack, free_port
from tests.worker.test_run_lifecycle import recorded_checkpoints, wait_for_final


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Network, Stack]]:
    """Two hosts, and a stack on PostgreSQL and Redis whose API listens on the bridge; no
    worker on the machine itself."""
    with hosts_and_api(2, tmp_path_factory.mktemp("hosts")) as (net, stack):
        yield net, stack


def net_namespace(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def test_a_worker_inside_a_host_trains_a_run_submitted_through_the_api(
    hosts: tuple[Network, Stack],
) -> None:
    net, stack = hosts
    host = net.hosts[0]
    worker = start_host_worker(stack, net, host, "host1-worker")
    # the worker's process is inside the host: its network is the namespace's, not ours
    assert net_namespace(worker.pid) == host.namespace()
    assert net_namespace(worker.pid) != net_namespace(os.getpid())

    with stack.client() as client:
        response = client.post("/api/runs", json=tiny_spec(stack, max_steps=3))
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        run = wait_for_final(client, run_id, timeout=240)
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        assert run["worker"].startswith("host1-worker-")
        steps = [m["step"] for m in client.get(f"/api/runs/{run_id}/metrics").json()["items"]]
        assert steps == [1, 2, 3]  # every step, each once

    # the worker wrote the run's files in the host's own data directory
    saved = recorded_checkpoints(stack, run_id)
    assert [c.step for c in saved] == [2, 3]
    assert all(Path(c.path).is_relative_to(host.data_dir) for c in saved)
    assert not (stack.data_dir / "runs").exists()


def test_a_host_reaches_the_machine_over_the_bridge_only(hosts: tuple[Network, Stack]) -> None:
    net, stack = hosts
    one, two = net.hosts
    api_port = int(stack.url.rsplit(":", 1)[1])
    pg = net.over_bridge("postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    redis = net.over_bridge(REDIS_URL)
    for url in (pg, redis):
        bridge = urlsplit(url)
        assert bridge.hostname == net.gateway and bridge.port
        assert one.connect_error(bridge.hostname, bridge.port) is None
    assert one.connect_error(net.gateway, api_port) is None

    # the machine's loopback services are not the host's: its 127.0.0.1 is its own
    for port in (5432, 6379, api_port):
        assert "Connection refused" in str(one.connect_error("127.0.0.1", port))
    # and nothing beyond the bridge is routed
    assert "unreachable" in str(one.connect_error("192.0.2.1", 80, timeout=1))

    # a server on host 2's loopback: host 2 reaches it there, host 1 and the machine do not;
    # on host 2's address host 1 reaches it over the bridge
    port = free_port()
    code = (
        "import socket, sys\n"
        "port, *addresses = sys.argv[1:]\n"
        "s = [socket.create_server((a, int(port))) for a in addresses]\n"
        "print('up', flush=True)\n"
        "sys.stdin.read()\n"
    )
    argv = [sys.executable, "-c", code, str(port), "127.0.0.1", two.address]
    with two.popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as server:
        try:
            assert server.stdout is not None and server.stdout.readline() == b"up\n"
            assert two.connect_error("127.0.0.1", port) is None
            assert "Connection refused" in str(one.connect_error("127.0.0.1", port))
            assert one.connect_error(two.address, port) is None
            with pytest.raises(httpx.ConnectError):
                httpx.get(f"http://127.0.0.1:{port}", timeout=2)
        finally:
            server.kill()


def test_a_failing_test_leaves_no_host_link_or_process(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="the test failed"), network(1, tmp_path) as net:
        (host,) = net.hosts
        sleeper = host.popen(["sleep", "300"])
        host.wait_inside(sleeper)
        net.over_bridge(REDIS_URL)
        (forwarder,) = net.forwarders
        built = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        assert f" {net.bridge}:" in built and f" {net.link_of(host)}@" in built
        raise RuntimeError("the test failed")
    assert sleeper.wait(timeout=5) < 0  # stopped by a signal, not finished
    assert forwarder.poll() is not None
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert host.name not in netns.split()
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert f" {net.bridge}:" not in links and f" {net.link_of(host)}@" not in links
