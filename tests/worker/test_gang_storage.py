"""What a gang checks before any rank starts (issue 42 items 3-4, worker/gang_check.py), on
two real hosts (tests/hosts.py) with a real `celery worker` in each, as tests/worker/
test_gang.py runs them: two hosts whose workers see different data directories fail the run
with one line and start no rank, and a node lost after the gang formed, while the launchers
meet, sends the run back to the queue instead of leaving node 0's worker on the launcher's
rendezvous.

The rules themselves (which node's view differs, and the line that says so) are cases of
worker/shared_storage.py's `problem` below: the hosts cannot show every one of them
cheaply (a node that would resume from another step needs a checkpoint on one side only,
which a shared run directory never shows).

Needs root and iproute2, as CI has; nothing here is skipped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from app.store.models import RunNode
from tests.hosts import Network, hosts_and_api, ip
from tests.netlock import changing_network
from tests.processes import rank_processes
from tests.stack import Stack
from tests.worker.test_gang import (
    LOSS,
    _node_holder,
    _wait_for_log,
    logs_of,
    steps_of,
    stop_workers,
    two_node_workers,
)
from tests.worker.test_ranks_service import LONG, ranks_spec
from tests.worker.test_run_lifecycle import wait_for_final
from worker.shared_storage import Marker, problem, read_marker, write_marker

STORAGE_S = "5"  # GRPO_GANG_STORAGE_SECONDS of the tests' workers


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Network, Stack]]:
    with hosts_and_api(2, tmp_path_factory.mktemp("gang-storage")) as (net, stack):
        yield net, stack


def node_rows(stack: Stack, run_id: str) -> list[RunNode]:
    """The run's node claims in the stack's store, by node rank."""
    return stack.rows(select(RunNode).where(RunNode.run_id == run_id).order_by(RunNode.node_rank))


def wait_for_rows(stack: Stack, run_id: str, states: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while (found := [r.state for r in node_rows(stack, run_id)]) != states:
        if time.monotonic() > deadline:
            raise AssertionError(f"node states {found}, not {states}")
        time.sleep(0.3)


def two_node_run(client: httpx.Client, stack: Stack, name: str, timeout: float = 120) -> str:
    """A run of 2 nodes x 1 rank, submitted once the API takes it: submit refuses a run of
    more nodes than workers registered, and the tests' workers register as they start."""
    spec = ranks_spec(stack, 1, name=name, max_steps=LONG)
    spec["resources"] = {**spec["resources"], "num_nodes": 2}  # type: ignore[dict-item]
    deadline = time.monotonic() + timeout
    while (created := client.post("/api/runs", json=spec)).status_code == 422:
        assert "resources.num_nodes" in created.text, created.text
        assert time.monotonic() < deadline, created.text
        time.sleep(0.5)
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def test_hosts_with_different_data_dirs_fail_the_run_with_one_line_and_start_no_rank(
    hosts: tuple[Network, Stack],
) -> None:
    net, stack = hosts
    settings = {"GRPO_GANG_STORAGE_SECONDS": STORAGE_S}
    workers = two_node_workers(net, stack, is_shared=False, **settings)
    try:
        with stack.client() as client:
            run_id = two_node_run(client, stack, "unshared")
            run = wait_for_final(client, run_id, timeout=300)
            assert run["status"] == "failed", f"{run['error']}\n{stack.logs()}"
            leader = _node_holder(client, run_id, 0)
            follower = net.hosts[1 - leader]
            # node 0 never saw node 1's marker (node 1 wrote it under its own data dir)
            looked = net.hosts[leader].data_dir / "runs" / run_id / "nodes" / "node-1.json"
            assert run["error"].startswith(f"node 0 (worker node{leader}-"), run["error"]
            assert f"does not see the marker node 1 (worker node{1 - leader}-" in run["error"]
            assert f"it looked for {looked} for 5 s (GRPO_GANG_STORAGE_SECONDS)" in run["error"]
            assert "every node must see one GRPO_DATA_DIR" in run["error"]
            assert 'docs/how-to/scaling.md, "Storage the nodes must share"' in run["error"]
            assert run["error"].endswith("no rank was started"), run["error"]
            lines = logs_of(client, run_id)
            assert [ln for ln in lines if "does not see" in ln] == [run["error"]], lines
            assert (follower.data_dir / "runs" / run_id / "nodes" / "node-1.json").is_file()
            # no rank started on either host: no launch (its error files' folder), no step
            for host in net.hosts:
                assert not (host.data_dir / "runs" / run_id / "ranks").exists(), host.name
            assert steps_of(client, run_id) == []
            assert not [ln for ln in lines if "its ranks ended" in ln], lines
            wait_for_rows(stack, run_id, [])  # both nodes released
            assert [rank_processes(w.pid) for w in workers] == [[], []]
            assert all(w.poll() is None for w in workers)  # the workers go on
    finally:
        stop_workers(workers)


def test_a_node_lost_while_the_launchers_meet_sends_the_run_back_to_the_queue(
    hosts: tuple[Network, Stack],
) -> None:
    """Node 1's launcher cannot reach node 0's rendezvous (a blackhole route to node 0's
    address inside each host: the store, the broker and the shared files are reached over
    the bridge's own address), so both workers wait there, every check passed and no rank
    started; then node 1's worker is SIGKILLed. Node 0's worker must hand the run back with
    the lost node's line, not wait out torch's 600 s rendezvous."""
    net, stack = hosts
    settings = {**LOSS, "GRPO_GANG_STORAGE_SECONDS": STORAGE_S,
                "GRPO_GANG_FORMATION_SECONDS": "30"}  # fmt: skip
    routes = [(a, b) for a in net.hosts for b in net.hosts if a is not b]
    with changing_network():
        for inside, to in routes:
            ip("-n", inside.name, "route", "add", "blackhole", f"{to.address}/32")
    workers = two_node_workers(net, stack, **settings)
    try:
        with stack.client() as client:
            run_id = two_node_run(client, stack, "lost-meeting")
            wait_for_rows(stack, run_id, ["running", "running"])  # both launchers started
            node1 = _node_holder(client, run_id, 1)
            assert [rank_processes(w.pid) for w in workers] == [[], []]
            workers[node1].kill()
            line = _wait_for_log(client, run_id, "was lost", timeout=120)
            assert f"node 1 (worker node{node1}-" in line and "no heartbeat for 6 s" in line, line
            assert "; before any rank started;" in line, line  # then where it starts again
            assert client.get(f"/api/runs/{run_id}").json()["status"] == "queued"
            assert rank_processes(workers[1 - node1].pid) == []
            assert steps_of(client, run_id) == []
            assert client.post(f"/api/runs/{run_id}/cancel").status_code in (200, 202)
            assert wait_for_final(client, run_id, timeout=120)["status"] == "cancelled"
    finally:
        stop_workers(workers)
        with changing_network():
            for inside, to in routes:
                ip("-n", inside.name, "route", "del", "blackhole", f"{to.address}/32", check=False)


def marker(node: int, **facts: object) -> Marker:
    base: dict[str, object] = {
        "node": node, "claim": f"{node}.1", "worker": f"w{node}",
        "path": f"/data{node}/runs/r/nodes/node-{node}.json", "resume_step": 4,
    }  # fmt: skip
    return Marker(**{**base, **facts})  # type: ignore[arg-type]


SAME = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("theirs", "said"),
    [
        ({}, None),
        ({"sees_leader": True, "datasets": {"d1": SAME}, "model": SAME}, None),
        (
            {"sees_leader": False, "leader_path": "/data1/runs/r/nodes/node-0.json"},
            "node 1 (worker w1) does not see the marker node 0 (worker w0) wrote in the "
            "run's directory: it looked for /data1/runs/r/nodes/node-0.json for 60 s "
            "(GRPO_GANG_STORAGE_SECONDS); every node must see one GRPO_DATA_DIR, on a "
            'filesystem they share (docs/how-to/scaling.md, "Storage the nodes must share"); '
            "no rank was started",
        ),
        (
            {"datasets": {"d1": "unreadable: [Errno 2] No such file: '/data1/datasets/d1.jsonl'"}},
            "node 1 (worker w1) cannot read the uploaded dataset 'd1': unreadable: [Errno 2] "
            "No such file: '/data1/datasets/d1.jsonl'; every node must see one GRPO_DATA_DIR "
            '(datasets/ under it) (docs/how-to/scaling.md, "Storage the nodes must share"); '
            "no rank was started",
        ),
        ({"datasets": {"d1": "sha256:" + "b" * 64}}, "reads other bytes for the uploaded"),
        ({"model": "not built"}, None),  # its ranks build it, under the cache's lock
        (
            {"model": "sha256:" + "c" * 64},
            "node 1 (worker w1) holds the built model sha256:cccccccccccc... in "
            "/cache1/builtin-tiny-v2, node 0 (worker w0) the built model "
            f"{SAME[:19]}... in /cache0/builtin-tiny-v2: every node must start from the same "
            "built-in model; share GRPO_CACHE_DIR, or build it once and copy it to every node",
        ),
        (
            {"resume_step": 0},
            "node 1 (worker w1) would resume from step 0 (no checkpoint in "
            "/data1/runs/r/checkpoints), node 0 (worker w0) from step 4 (its latest "
            "checkpoint in /data0/runs/r/checkpoints): every node must see node 0's "
            "checkpoints in one GRPO_DATA_DIR",
        ),
    ],
)
def test_a_node_whose_view_differs_from_node_0s_is_named_in_one_line(
    theirs: dict[str, object], said: str | None
) -> None:
    ours = marker(0, datasets={"d1": SAME}, model=SAME, model_dir="/cache0/builtin-tiny-v2")
    defaults: dict[str, object] = {"datasets": {"d1": SAME}, "model": SAME,
                                   "model_dir": "/cache1/builtin-tiny-v2"}  # fmt: skip
    found = problem(ours, marker(1, **{**defaults, **theirs}), seconds=60)
    if said is None:
        assert found is None
    else:
        assert found is not None and said in found, found
        assert found.count("\n") == 0 and found.endswith("no rank was started")


def test_a_marker_of_another_claim_is_not_taken_for_this_ones(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "r" / "nodes" / "node-1.json"
    write_marker(marker(1, path=str(path)))
    assert read_marker(path, "1.1") == marker(1, path=str(path))
    assert read_marker(path, "1.2") is None  # the node was taken over since: lease 2
    assert read_marker(tmp_path / "none.json", "1.1") is None
