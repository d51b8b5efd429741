"""The check every node of a run on several machines passes before any rank starts (issue
42 item 4): its nodes see one run directory, read the same uploaded datasets, hold the same
built-in model and would resume from the same step (worker/shared_storage.py says what
each node reports and why those are the rules).

Node 0's worker (it holds the run) writes its marker once it claimed the run; every other
node waits up to GRPO_GANG_STORAGE_SECONDS to see node 0's, writes its own (saying whether
it saw node 0's) and marks its node `checked` in the store. Node 0 waits for every node to
be checked, then up to GRPO_GANG_STORAGE_SECONDS for each one's marker, compares, and marks
its own node `running`: the signal on which every node launches its ranks. So no rank
starts anywhere before every node passed, and a failed check fails the run (NotShared: the
deployment must change) with no rank started on any node.

A node lost meanwhile (its claim expired, was released or taken over: its worker died or
was cut off) hands the run back as any lost node does (GangBroke), and a stop or a cancel
asked for meanwhile is honoured at once: the check never waits on a node that is gone.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol, cast

from app.settings import get_settings
from app.store import db, events, lease, nodes, runs
from app.store.lease import Lease
from app.store.models import NodeState, Run, RunNode, RunStatus
from app.store.nodes import NodeClaim
from grpo.spec import JobSpec
from worker.placement import CancelledWaiting
from worker.ranks import GangBroke, StoppedStarting, leading
from worker.shared_storage import (
    Marker,
    NotShared,
    claim_id,
    marker_path,
    own_marker,
    problem,
    read_marker,
    unseen,
    who,
    write_marker,
)

log = logging.getLogger(__name__)
POLL_SECONDS = 0.5


class Node(Protocol):
    """This worker's node of the gang (worker/gang.py's Gang)."""

    claim: NodeClaim
    worker: str
    peers: dict[int, tuple[int, str]]
    state: NodeState

    def broken(self) -> str | None: ...

    def beat(self, state: NodeState) -> None: ...


def check_as_leader(held: Lease, spec: JobSpec, *, stopping: threading.Event) -> None:
    """On node 0, before its ranks launch: return once every node passed (its node is then
    `running`); NotShared, GangBroke, StoppedStarting or CancelledWaiting otherwise. Nothing
    to do for a run on one machine."""
    if (node := leading.get(held.run_id)) is None:
        return
    gang = cast(Node, node)  # worker/gang.py's Gang
    ours = own_marker(held.run_id, spec, node=0, claim=_own_claim(gang), worker=gang.worker)
    try:
        write_marker(ours)
    except OSError as e:
        raise NotShared(f"{who(0, gang.worker)} cannot write its marker in the run's "
                        f"directory: {e}; GRPO_DATA_DIR must be writable by every worker "
                        "(docs/how-to/scaling.md); no rank was started") from e  # fmt: skip
    seconds = get_settings().gang_storage_seconds
    for row in _checked(gang, held, stopping=stopping):
        theirs = _wait_for_marker(gang, row, held=held, stopping=stopping)
        if theirs is None:
            raise NotShared(unseen(who(0, gang.worker), marker_path(held.run_id, row.node_rank),
                                   who(row.node_rank, row.worker), seconds))  # fmt: skip
        if (why := problem(ours, theirs, seconds=seconds)) is not None:
            raise NotShared(why)
    _set_state(gang, NodeState.RUNNING)


def _checked(gang: Node, held: Lease, *, stopping: threading.Event) -> list[RunNode]:
    """Every other node's claim once each is `checked`; bounded by how long a live node
    takes to check (GRPO_GANG_STORAGE_SECONDS and its polls), past which it is taken for
    lost."""
    settings = get_settings()
    deadline = time.monotonic() + settings.gang_storage_seconds + 2 * settings.stale_after_seconds
    while True:
        _leader_watch(gang, held, stopping=stopping)
        rows = _peer_rows(gang)
        if all(row.state in (NodeState.CHECKED, NodeState.RUNNING) for row in rows):
            return rows
        if time.monotonic() > deadline:
            late = next(r for r in rows if r.state not in (NodeState.CHECKED, NodeState.RUNNING))
            raise GangBroke(f"{who(late.node_rank, late.worker)} was lost: it did not check "
                            "the shared files before any rank started")  # fmt: skip
        time.sleep(POLL_SECONDS)


def _wait_for_marker(
    gang: Node, row: RunNode, *, held: Lease, stopping: threading.Event
) -> Marker | None:
    """Node `row`'s marker as this node sees it, within GRPO_GANG_STORAGE_SECONDS."""
    path, claim = marker_path(held.run_id, row.node_rank), claim_id(row.id, row.lease)
    deadline = time.monotonic() + get_settings().gang_storage_seconds
    while (found := read_marker(path, claim)) is None and time.monotonic() < deadline:
        _leader_watch(gang, held, stopping=stopping)
        time.sleep(POLL_SECONDS)
    return found


def _leader_watch(gang: Node, held: Lease, *, stopping: threading.Event) -> None:
    """Raise what ends node 0's wait: a lost node, this worker's stop, a cancel."""
    if (why := gang.broken()) is not None:
        raise GangBroke(f"{why}; before any rank started")
    if stopping.is_set():
        raise StoppedStarting("handed the run back to the queue before its ranks started")
    if db.call(lease.check, held):
        raise CancelledWaiting("cancelled before its ranks started")


def _peer_rows(gang: Node) -> list[RunNode]:
    """The other nodes' claims, as they were when the gang formed; GangBroke for one that
    was released or taken over since."""
    rows = {r.node_rank: r for r in db.call(nodes.gang_of, gang.claim.run_id)}
    found = []
    for rank, (token, worker) in sorted(gang.peers.items()):
        row = rows.get(rank)
        if row is None or row.lease != token:
            raise GangBroke(f"{who(rank, worker)} was lost: its claim was released or taken "
                            "over, before any rank started")  # fmt: skip
        found.append(row)
    return found


def check_as_follower(gang: Node, spec: JobSpec, run: Run, *, stopping: threading.Event) -> bool:
    """On a node other than 0, once node 0's worker claimed `run`: write this node's marker
    (having looked for node 0's) and wait for node 0's word; True when its ranks may
    launch, False when the run ended, was handed back or the gang broke (said in this
    worker's log: node 0's worker says it in the run's)."""
    rank, settings = gang.claim.node_rank, get_settings()
    leader = next((r for r in db.call(nodes.gang_of, run.id) if r.node_rank == 0), None)
    if leader is None or leader.lease != gang.peers[0][0]:
        return False
    leader_path = marker_path(run.id, 0)
    deadline = time.monotonic() + settings.gang_storage_seconds
    seen = read_marker(leader_path, claim_id(leader.id, leader.lease)) is not None
    while not seen and time.monotonic() < deadline:
        if _follower_ends(gang, run, stopping=stopping):
            return False
        time.sleep(POLL_SECONDS)
        seen = read_marker(leader_path, claim_id(leader.id, leader.lease)) is not None
    ours = own_marker(run.id, spec, node=rank, claim=_own_claim(gang), worker=gang.worker)
    ours.sees_leader, ours.leader_path = seen, str(leader_path)
    try:
        write_marker(ours)
    except OSError as e:  # node 0 will not see it: this says why
        said = f"{who(rank, gang.worker)} cannot write its marker in the run's directory: {e}"
        db.call(events.add_log, run.id, "warning", said)
    _set_state(gang, NodeState.CHECKED)
    while not _follower_ends(gang, run, stopping=stopping):
        if _leader_state(run.id, leader) == NodeState.RUNNING:
            _set_state(gang, NodeState.RUNNING)
            return True
        time.sleep(POLL_SECONDS)
    return False


def _follower_ends(gang: Node, run: Run, *, stopping: threading.Event) -> bool:
    """Whether this node's wait is over: the gang broke, the worker stops, or the run is no
    longer node 0's worker's running claim (it failed, was cancelled or handed back)."""
    if (why := gang.broken()) is not None:
        log.warning("run %s: %s, before any rank started", run.id, why)
        return True
    now = db.call(runs.get_run, run.id)
    return (
        stopping.is_set()
        or now is None
        or now.status != RunStatus.RUNNING
        or now.lease != run.lease
    )


def _leader_state(run_id: str, leader: RunNode) -> str | None:
    rows = db.call(nodes.gang_of, run_id)
    row = next((r for r in rows if r.node_rank == 0 and r.lease == leader.lease), None)
    return None if row is None else row.state


def _own_claim(gang: Node) -> str:
    return claim_id(gang.claim.row_id, gang.claim.token)


def _set_state(gang: Node, state: NodeState) -> None:
    """What this node's beats say from now on, said at once."""
    gang.state = state
    gang.beat(state)
