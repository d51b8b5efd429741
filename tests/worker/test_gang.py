"""One run on several machines through the service (issue 42 items 1-2): two hosts made
here (tests/hosts.py, network namespaces on a bridge), a real `celery worker` in each with
GRPO_WORKER_ADDRESS its host's address, and a run of 2 nodes x 1 rank submitted through the
API. Its task is sent once per node, each worker claims a node in the store
(app/store/nodes.py), and once the gang is whole both launch their rank with torch's
elastic launcher on node 0's rendezvous (worker/gang.py): real torch.distributed (gloo)
ranks talking across the bridge.

Needs root and iproute2, as CI has; nothing here is skipped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.hosts import Network, network, start_host_worker
from tests.stack import REDIS_URL, Stack, pg_database, running_stack
from tests.worker.test_ranks_service import (
    WIDE,
    assert_each_step_stored_once,
    ranks_spec,
    same_share,
)
from tests.worker.test_run_lifecycle import recorded_checkpoints, wait_for_final

FORMATION_S = 8.0  # GRPO_GANG_FORMATION_SECONDS of the test's workers


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Network, Stack]]:
    """Two hosts, and a stack on PostgreSQL and Redis whose API listens on the bridge; no
    worker on the machine itself."""
    base = tmp_path_factory.mktemp("gang")
    with (
        network(2, base) as net,
        pg_database() as url,
        running_stack(
            base / "api",
            database_url=url,
            broker_url=REDIS_URL,
            host=net.gateway,
            with_worker=False,
        ) as stack,
    ):
        yield net, stack


def logs_of(client: httpx.Client, run_id: str) -> list[str]:
    return [m["message"] for m in client.get(f"/api/runs/{run_id}/logs").json()["items"]]


def test_one_worker_alone_waits_with_its_reason_and_releases_its_node(
    hosts: tuple[Network, Stack],
) -> None:
    net, stack = hosts
    host = net.hosts[0]
    settings = {"GRPO_WORKER_ADDRESS": host.address,
                "GRPO_GANG_FORMATION_SECONDS": str(FORMATION_S)}  # fmt: skip
    worker = start_host_worker(stack, net, host, "alone", extra_env=settings)
    try:
        with stack.client() as client:
            spec = ranks_spec(stack, 1, name="alone", max_steps=1)
            spec["resources"] = {**spec["resources"], "num_nodes": 2}  # type: ignore[dict-item]
            run_id = client.post("/api/runs", json=spec).json()["id"]
            reason = "1 of 2 nodes claimed: waiting for 1 more worker holding 1 device"
            _wait_for_log(client, run_id, reason)
            assert client.get(f"/api/runs/{run_id}").json()["status"] == "queued"
            released = _wait_for_log(client, run_id, "released node 0", FORMATION_S + 30)
            assert "did not form within 8 s (GRPO_GANG_FORMATION_SECONDS)" in released
            assert client.get(f"/api/runs/{run_id}").json()["status"] == "queued"
            assert client.post(f"/api/runs/{run_id}/cancel").status_code in (200, 202)
            assert wait_for_final(client, run_id, timeout=60)["status"] == "cancelled"
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def _wait_for_log(client: httpx.Client, run_id: str, text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [line for line in logs_of(client, run_id) if text in line]
        if found:
            return found[0]
        time.sleep(0.5)
    raise AssertionError(f"no log line with {text!r} in {logs_of(client, run_id)}")


def test_two_workers_on_two_hosts_train_one_run_of_two_nodes(
    hosts: tuple[Network, Stack],
) -> None:
    net, stack = hosts
    workers = [
        start_host_worker(
            stack,
            net,
            host,
            f"node{i}",
            extra_env={
                "GRPO_WORKER_ADDRESS": host.address,
                "GRPO_GANG_FORMATION_SECONDS": "120",
            },
        )  # fmt: skip
        for i, host in enumerate(net.hosts)
    ]
    try:
        with stack.client() as client:
            spec = ranks_spec(stack, 1, name="two-nodes", **WIDE)
            spec["resources"] = {**spec["resources"], "num_nodes": 2}  # type: ignore[dict-item]
            two = client.post("/api/runs", json=spec)
            assert two.status_code == 201, two.text
            run = wait_for_final(client, two.json()["id"], timeout=300)
            assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
            assert_each_step_stored_once(client, run["id"])
            lines = logs_of(client, run["id"])
            claims = sorted(line for line in lines if " claimed node " in line)
            assert len(claims) == 2, lines
            takers = {line.split()[1].split("-")[0] for line in claims}
            assert takers == {"node0", "node1"}  # one node each, one worker each
            assert any("claimed node 0 of 2" in c for c in claims)
            assert any("claimed node 1 of 2" in c for c in claims)
            assert not [line for line in lines if "its ranks ended" in line]
            # node 0's worker is the run's; its host holds the checkpoints
            leader = next(c.split()[1] for c in claims if "node 0 of 2" in c)
            assert run["worker"] == leader
            (leader_host,) = [h for h in net.hosts if leader.startswith(
                f"node{net.hosts.index(h)}-")]  # fmt: skip
            saved = recorded_checkpoints(stack, run["id"])
            assert saved and all(Path(c.path).is_relative_to(leader_host.data_dir) for c in saved)

            # layout invariance: the same spec on one node samples the same step 1
            one = client.post("/api/runs", json={**spec, "name": "one-node", "resources": {
                "queue": stack.queue}})  # fmt: skip
            assert one.status_code == 201, one.text
            single = wait_for_final(client, one.json()["id"], timeout=300)
            assert single["status"] == "succeeded", f"{single['error']}\n{stack.logs()}"
            assert same_share(client, run["id"], single["id"]) >= 0.95
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=60)
