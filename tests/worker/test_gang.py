"""One run on several machines through the service (issue 42 items 1-2): two hosts made
here (tests/hosts.py, network namespaces on a bridge), a real `celery worker` in each with
GRPO_WORKER_ADDRESS its host's address, and a run of 2 nodes x 1 rank submitted through the
API. Its task is sent once per node, each worker claims a node in the store
(app/store/nodes.py), and once the gang is whole and has shown that both hosts see one data
directory (worker/gang_check.py) both launch their rank with torch's
elastic launcher on node 0's rendezvous (worker/gang.py): real torch.distributed (gloo)
ranks talking across the bridge. Failure is whole-gang (item 3): a cancel stops both nodes,
and a SIGKILLed node 1 stops node 0's rank within its claim's expiry, the run goes back to
the queue and resumes on a gang formed again.

Needs root and iproute2, as CI has; nothing here is skipped.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from app.store import workers
from tests.hosts import Network, hosts_and_api, ip, start_host_worker
from tests.netlock import changing_network
from tests.processes import rank_processes
from tests.stack import Stack
from tests.worker.test_ranks_service import (
    LONG,
    WIDE,
    assert_each_step_stored_once,
    ranks_spec,
    same_share,
    wait_gone,
)
from tests.worker.test_run_lifecycle import recorded_checkpoints, wait_for_final
from tests.worker.test_worker_resilience import wait_for_step

FORMATION_S = 8.0  # GRPO_GANG_FORMATION_SECONDS of the test's workers


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Network, Stack]]:
    """Two hosts, and a stack on PostgreSQL and Redis whose API listens on the bridge; no
    worker on the machine itself."""
    with hosts_and_api(2, tmp_path_factory.mktemp("gang")) as (net, stack):
        yield net, stack


@pytest.fixture(scope="module")
def pair(hosts: tuple[Network, Stack]) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The gang tests' two node workers (node0 in host 1, node1 in host 2), started once for
    the module: a worker and its fork server cost an import of torch each, and these tests
    differ only in their runs. Their claims expire fast (LOSS) for the loss tests, and they
    share one data directory. A test that kills or stops one leaves the slot for
    `live_pair` to fill again."""
    net, stack = hosts
    workers = two_node_workers(net, stack, **LOSS)
    try:
        yield workers
    finally:
        stop_workers(workers)


def live_pair(
    hosts: tuple[Network, Stack], pair: list[subprocess.Popen[bytes]]
) -> list[subprocess.Popen[bytes]]:
    """`pair`, a fresh worker in the slot of each that is no longer running."""
    net, stack = hosts
    for i, worker in enumerate(pair):
        if worker.poll() is not None:
            pair[i] = start_node_worker(net, stack, i, **LOSS)
    return pair


def worker_name(worker: subprocess.Popen[bytes]) -> str:
    """The name a worker started by Stack.start_worker gives itself (its --hostname)."""
    args = [str(a) for a in worker.args]  # type: ignore[union-attr]
    return args[args.index("--hostname") + 1].split("@")[0]


def logs_of(client: httpx.Client, run_id: str) -> list[str]:
    return [m["message"] for m in client.get(f"/api/runs/{run_id}/logs").json()["items"]]


def test_one_worker_alone_waits_with_its_reason_and_releases_its_node(
    hosts: tuple[Network, Stack],
) -> None:
    """With one worker, submit refuses a run of 2 nodes (no set of workers could hold it);
    with the other registered but gone (it died, and may come back), it takes the run, and
    the run says what it waits for, in its log and as its `waiting_for`."""
    net, stack = hosts
    host = net.hosts[0]
    settings = {"GRPO_WORKER_ADDRESS": host.address,
                "GRPO_GANG_FORMATION_SECONDS": str(FORMATION_S)}  # fmt: skip
    worker = start_host_worker(stack, net, host, "alone", extra_env=settings)
    try:
        with stack.client() as client:
            wait_listed(client, 1)
            spec = ranks_spec(stack, 1, name="alone", max_steps=1)
            spec["resources"] = {**spec["resources"], "num_nodes": 2}  # type: ignore[dict-item]
            refused = client.post("/api/runs", json=spec)  # one worker: it could never form
            assert refused.status_code == 422, refused.text
            assert [f["loc"] for f in refused.json()["error"]["fields"]] == ["resources.num_nodes"]
            registered_worker(stack, "gone", net.hosts[1].address)  # it may come back
            submitted = client.post("/api/runs", json=spec)
            assert submitted.status_code == 201, submitted.text
            run_id = submitted.json()["id"]
            reason = "1 of 2 nodes claimed: waiting for 1 more worker holding 1 device"
            _wait_for_log(client, run_id, reason)
            run = client.get(f"/api/runs/{run_id}").json()
            assert (run["status"], run["waiting_for"]) == ("queued", reason)
            released = _wait_for_log(client, run_id, "released node 0", FORMATION_S + 30)
            assert "did not form within 8 s (GRPO_GANG_FORMATION_SECONDS)" in released
            assert client.get(f"/api/runs/{run_id}").json()["status"] == "queued"
            assert client.post(f"/api/runs/{run_id}/cancel").status_code in (200, 202)
            final = wait_for_final(client, run_id, timeout=60)
            assert (final["status"], final["waiting_for"]) == ("cancelled", None)
    finally:
        forget_worker(stack, "gone")
        worker.terminate()
        worker.wait(timeout=60)


def wait_listed(client: httpx.Client, count: int, timeout: float = 300) -> None:
    """Until `count` workers with an address are listed: submit checks a run of several
    nodes against the workers registered (app/api/checks/nodes.py), and a worker started
    here registers once it is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = client.get("/api/workers").json()["items"]
        if len([w for w in items if w["address"]]) >= count:
            return
        time.sleep(0.5)
    raise TimeoutError(f"fewer than {count} workers with an address listed: {items}")


def registered_worker(stack: Stack, name: str, address: str) -> None:
    """A worker's row, as one that registered and then died leaves it (no process)."""
    engine = create_engine(stack.env["GRPO_DATABASE_URL"])
    try:
        with Session(engine) as session:
            workers.report_worker(
                session, name, queues=stack.queue, device="cpu", device_kind="cpu",
                devices=["0"], free_memory_mb=None, run_id=None, address=address,
            )  # fmt: skip
    finally:
        engine.dispose()


def forget_worker(stack: Stack, name: str) -> None:
    engine = create_engine(stack.env["GRPO_DATABASE_URL"])
    try:
        with Session(engine) as session:
            workers.forget_worker(session, name)
    finally:
        engine.dispose()


def steps_of(client: httpx.Client, run_id: str) -> list[int]:
    return [m["step"] for m in client.get(f"/api/runs/{run_id}/metrics").json()["items"]]


def _wait_for_log(client: httpx.Client, run_id: str, text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [line for line in logs_of(client, run_id) if text in line]
        if found:
            return found[0]
        time.sleep(0.5)
    raise AssertionError(f"no log line with {text!r} in {logs_of(client, run_id)}")


def test_two_workers_on_two_hosts_train_one_run_of_two_nodes(
    hosts: tuple[Network, Stack], pair: list[subprocess.Popen[bytes]]
) -> None:
    net, stack = hosts
    workers = live_pair(hosts, pair)
    with stack.client() as client:
        spec = ranks_spec(stack, 1, name="two-nodes", **WIDE)
        spec["resources"] = {**spec["resources"], "num_nodes": 2}  # type: ignore[dict-item]
        wait_listed(client, 2)
        two = client.post("/api/runs", json=spec)
        assert two.status_code == 201, two.text
        run = wait_for_final(client, two.json()["id"], timeout=300)
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        assert_each_step_stored_once(client, run["id"])
        lines = logs_of(client, run["id"])
        claims = sorted(line for line in lines if " claimed node " in line)
        assert len(claims) == 2, lines
        takers = {line.split()[1].split("@")[0] for line in claims}
        assert takers == {worker_name(w) for w in workers}  # one node each, one worker each
        assert any("claimed node 0 of 2" in c for c in claims)
        assert any("claimed node 1 of 2" in c for c in claims)
        assert not [line for line in lines if "its ranks ended" in line]
        # node 0's worker is the run's; its rank 0 wrote the checkpoints, in the data
        # directory both hosts share, where each node left its marker before its rank
        leader = next(c.split()[1] for c in claims if "node 0 of 2" in c)
        assert run["worker"] == leader
        saved = recorded_checkpoints(stack, run["id"])
        assert saved and all(Path(c.path).is_relative_to(shared_dir(net)) for c in saved)
        nodes = shared_dir(net) / "runs" / run["id"] / "nodes"
        assert sorted(p.name for p in nodes.iterdir()) == ["node-0.json", "node-1.json"]

        # layout invariance: the same spec on one node samples the same step 1
        one = client.post("/api/runs", json={**spec, "name": "one-node", "resources": {
            "queue": stack.queue}})  # fmt: skip
        assert one.status_code == 201, one.text
        single = wait_for_final(client, one.json()["id"], timeout=300)
        assert single["status"] == "succeeded", f"{single['error']}\n{stack.logs()}"
        assert same_share(client, run["id"], single["id"]) >= 0.95
        assert all(w.poll() is None for w in workers)


def shared_dir(net: Network) -> Path:
    """The data directory the hosts share, as docs/how-to/scaling.md asks of a deployment."""
    return net.base_dir / "shared"


def two_node_workers(
    net: Network, stack: Stack, *, is_shared: bool = True, **settings: str
) -> list[subprocess.Popen[bytes]]:
    """A worker in each host, node0 in the first, node1 in the second; both on one data
    directory (`shared_dir`) unless `is_shared` is false: then each host's own."""
    return [
        start_node_worker(net, stack, i, is_shared=is_shared, **settings)
        for i in range(len(net.hosts))
    ]


def start_node_worker(
    net: Network, stack: Stack, i: int, *, is_shared: bool = True, **settings: str
) -> subprocess.Popen[bytes]:
    """Worker `node{i}` in host i, as `two_node_workers` starts each."""
    host = net.hosts[i]
    shared = {"GRPO_DATA_DIR": str(shared_dir(net))} if is_shared else {}
    return start_host_worker(
        stack,
        net,
        host,
        f"node{i}",
        extra_env={
            "GRPO_WORKER_ADDRESS": host.address,
            "GRPO_GANG_FORMATION_SECONDS": "120",
            **shared,
            **settings,
        },
    )  # fmt: skip


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        if worker.poll() is None:
            worker.terminate()
    for worker in workers:
        worker.wait(timeout=60)


def wait_for_each_rank(workers: list[subprocess.Popen[bytes]], timeout: float = 120) -> list[int]:
    """One rank of each worker, once both have started theirs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ranks = [rank_processes(w.pid) for w in workers]
        if all(ranks):
            return [r[0] for r in ranks]
        time.sleep(0.2)
    raise TimeoutError(f"not every worker started its rank: {ranks}")


def test_a_cancel_stops_both_nodes_and_leaves_no_rank_on_either_host(
    hosts: tuple[Network, Stack], pair: list[subprocess.Popen[bytes]]
) -> None:
    _, stack = hosts
    workers = live_pair(hosts, pair)
    with stack.client() as client:
        spec = ranks_spec(stack, 1, name="two-nodes-cancel", max_steps=LONG)
        spec["resources"] = {**spec["resources"], "num_nodes": 2}  # type: ignore[dict-item]
        wait_listed(client, 2)
        run_id = client.post("/api/runs", json=spec).json()["id"]
        wait_for_step(client, run_id, 1, timeout=300)
        ranks = wait_for_each_rank(workers)
        assert client.post(f"/api/runs/{run_id}/cancel").json()["is_cancel_requested"]
        run = wait_for_final(client, run_id, timeout=120)
        assert run["status"] == "cancelled", f"{run['error']}\n{stack.logs()}"
        assert wait_gone(ranks, timeout=30) == []
        assert [rank_processes(w.pid) for w in workers] == [[], []]
        assert steps_of(client, run_id) == list(range(1, run["step"] + 1))
        assert not [line for line in logs_of(client, run_id) if "its ranks ended" in line]
        assert all(w.poll() is None for w in workers)  # the workers go on


STEPS = 60  # a tiny step takes well under a second: the kill lands mid-run


def _node_holder(client: httpx.Client, run_id: str, node: int) -> int:
    """The index (in the test's list) of the worker that claimed `node` of the run."""
    (line,) = [ln for ln in logs_of(client, run_id) if f"claimed node {node} of" in ln]
    return int(line.split()[1].split("-")[0].removeprefix("node"))


LOSS = {"GRPO_HEARTBEAT_SECONDS": "1", "GRPO_STALE_AFTER_SECONDS": "6"}
"""Settings of the loss tests' workers: a node's claim expires 6 s after its last beat."""
STOPPED_WITHIN_S = 60
"""How soon after a node is lost the other node's ranks must be gone: about 7 s here (the
claim's 6 s expiry and a beat), so far above it that load cannot fail it, and far below
gloo's own timeout (30 minutes), which is what would end a rank left in a collective."""


def start_two_node_run(
    client: httpx.Client, stack: Stack, workers: list[subprocess.Popen[bytes]], name: str
) -> tuple[str, list[int], int]:
    """A 2-node run trained past its first checkpoint: its id, each worker's rank (by
    worker index), and the index of the worker holding node 1."""
    spec = ranks_spec(stack, 1, name=name, max_steps=STEPS, save_steps=2)
    spec["resources"] = {**spec["resources"], "num_nodes": 2}  # type: ignore[dict-item]
    wait_listed(client, 2)
    run_id = client.post("/api/runs", json=spec).json()["id"]
    wait_for_step(client, run_id, 2, timeout=300)
    ranks = wait_for_each_rank(workers)
    return run_id, ranks, _node_holder(client, run_id, 1)


def test_a_killed_node_stops_the_gang_and_the_run_resumes_once_it_is_back(
    hosts: tuple[Network, Stack], pair: list[subprocess.Popen[bytes]]
) -> None:
    # every node reads the run's checkpoint at resume: the pair's one data directory, as
    # the shared filesystem docs/how-to/scaling.md asks for
    _, stack = hosts
    workers = live_pair(hosts, pair)
    with stack.client() as client:
        run_id, ranks, node1 = start_two_node_run(client, stack, workers, "two-nodes-kill")
        rank0 = ranks[1 - node1]
        workers[node1].kill()  # and with it its rank (parent-death signal)
        killed = time.monotonic()
        workers[node1].wait(timeout=60)
        line = _wait_for_log(client, run_id, "was lost", timeout=60)
        assert wait_gone([rank0], timeout=30) == []
        assert time.monotonic() - killed < STOPPED_WITHIN_S, line
        assert f"node 1 (worker node{node1}-" in line and "no heartbeat for 6 s" in line, line
        assert "every node's ranks were stopped" in line, line
        assert [ln for ln in logs_of(client, run_id) if "was lost" in ln] == [line]
        assert client.get(f"/api/runs/{run_id}").json()["status"] == "queued"
        assert rank_processes(workers[1 - node1].pid) == []
        assert client.get(f"/api/runs/{run_id}").json()["step"] < STEPS

        back = live_pair(hosts, pair)[node1]  # a new worker in the lost node's host
        run = wait_for_final(client, run_id, timeout=300)
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        assert steps_of(client, run_id) == list(range(1, STEPS + 1))  # every step once
        lines = logs_of(client, run_id)
        assert any(f"worker {worker_name(back)}@" in ln and "claimed node" in ln for ln in lines)
        assert any("resum" in ln for ln in lines), lines


def test_a_partitioned_node_stops_the_gang_and_leaves_no_process_behind(
    hosts: tuple[Network, Stack], pair: list[subprocess.Popen[bytes]]
) -> None:
    net, stack = hosts
    workers = live_pair(hosts, pair)
    try:
        with stack.client() as client:
            run_id, ranks, node1 = start_two_node_run(client, stack, workers, "two-nodes-cut")
            link = net.link_of(net.hosts[node1])
            with changing_network():
                ip("link", "set", link, "down")
            cut = time.monotonic()
            try:
                line = _wait_for_log(client, run_id, "was lost", timeout=60)
                assert f"node 1 (worker node{node1}-" in line, line
                assert "no heartbeat for 6 s" in line, line
                # both sides stop their ranks within the expiry: node 1's worker cannot
                # reach the store, so it takes its own node for lost
                assert wait_gone(ranks, timeout=30) == []
                assert time.monotonic() - cut < STOPPED_WITHIN_S
                assert client.get(f"/api/runs/{run_id}").json()["status"] == "queued"
            finally:
                with changing_network():
                    ip("link", "set", link, "up")
            run = wait_for_final(client, run_id, timeout=300)
            assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
            assert steps_of(client, run_id) == list(range(1, STEPS + 1))  # every step once
            assert [rank_processes(w.pid) for w in workers] == [[], []]
    finally:
        stop_workers(workers)  # live_pair starts new ones for a test after this one
    for host in net.hosts:  # nothing left in either host once its worker is gone
        assert host.leftovers() == [], host.name
