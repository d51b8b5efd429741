"""A worker's part in a run on several machines (`resources.num_nodes` > 1, issue 42): the
gang of workers that trains it forms in the store (app/store/nodes.py), one node each.

The run's task is sent once per node (app/queue.py), so that as many workers each take
one. A worker that takes it claims the lowest free node (its row says where it is:
GRPO_WORKER_ADDRESS and a free port there), beats that claim's heartbeat from a thread of
its own, and waits until every node is claimed. A gang that does not form within
GRPO_GANG_FORMATION_SECONDS is given up: the worker releases its node, says so in the
run's log, and sends its task back to the queue for a later worker; the run stays queued.

Once the gang is whole, node 0's worker claims the run as any run is claimed (its lease,
its heartbeat, its final status: worker/job.py) and, once every node showed that it sees
the files the nodes share (worker/gang_check.py: no rank starts anywhere before), every node
launches its ranks with torch's elastic launcher (grpo/parallel/launch.py): node n of a
static rendezvous whose store node 0 serves at the endpoint in its row, so that node 0
holds global rank 0, which alone writes to the store. The other nodes' workers hold only
their node: their ranks write nothing, and what they end with is said in the run's log,
not written as its status. A node's ranks exchange tensors over the network interface that holds
GRPO_WORKER_ADDRESS (gloo's and NCCL's socket interface, unless the worker's environment
names one).

A lost node stops the whole gang (issue 42 item 3): at each beat a worker reads the other
nodes' claims, and one that expired (its worker died, or was cut off from the store) or
was taken over breaks the gang, as does this worker's own claim lost or unreachable for
GRPO_STALE_AFTER_SECONDS. Each worker then kills its node's ranks at once
(worker/ranks.py: GangBroke), and node 0's worker hands the run back with one line naming
the lost node and why; it resumes from its last checkpoint once a gang forms again.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from app.queue import send_run
from app.settings import get_settings
from app.store import db, events, nodes, runs
from app.store.lease import Lease
from app.store.models import NodeState, Run, RunNode, RunStatus, utcnow
from app.store.nodes import NodeClaim, NodeLost
from grpo.parallel.launch import Nodes
from grpo.scrub import scrub
from grpo.spec import JobSpec
from worker.address import free_port
from worker.gang_check import check_as_follower
from worker.ranks import leading, train_on_ranks

log = logging.getLogger(__name__)
POLL_SECONDS = 0.5


@dataclass
class Gang:
    """This worker's node of a run whose gang formed: where the nodes meet, the other nodes'
    claims as they were when it formed (`peers`), and the thread that beats its claim and
    watches theirs until `leave`."""

    claim: NodeClaim
    nodes: Nodes
    worker: str
    peers: dict[int, tuple[int, str]] = field(default_factory=dict)
    """The other nodes once the gang formed: node rank -> (its claim's lease, its worker)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    lost: threading.Event = field(default_factory=threading.Event)
    why: str | None = None
    """Which node was lost and why, once `lost` is set (one line for the run's log)."""
    beaten: float = field(default_factory=time.monotonic)
    """When this node's claim was last beaten (time.monotonic)."""
    state: NodeState = NodeState.CLAIMED
    """What its beats write on its claim: checked, then running (worker/gang_check.py)."""

    @property
    def is_leader(self) -> bool:
        return self.claim.node_rank == 0

    def broken(self) -> str | None:
        """Why the gang broke up (a node was lost), or None while it is whole. A beat that
        has not come back for GRPO_STALE_AFTER_SECONDS (cut off, the store's connection can
        hang rather than fail) counts as this node lost: its claim has expired by now."""
        if not self.lost.is_set() and time.monotonic() - self.beaten > _ttl():
            me = f"node {self.claim.node_rank} (worker {self.worker})"
            self._lose(f"{me} was lost: it could not reach the store for {_ttl():g} s "
                       "(GRPO_STALE_AFTER_SECONDS)")  # fmt: skip
        return self.why if self.lost.is_set() else None

    def beat(self, state: NodeState) -> None:
        db.call(nodes.beat_node, self.claim, ttl_seconds=_ttl(), state=state)

    def start_beating(self) -> None:
        threading.Thread(target=self._beat, name=f"node-{self.claim.run_id}", daemon=True).start()

    def _beat(self) -> None:
        me = f"node {self.claim.node_rank} (worker {self.worker})"
        while not self._stop.wait(get_settings().heartbeat_seconds):
            try:
                self.beat(self.state)
                self.beaten = time.monotonic()
                self._check_peers()
            except NodeLost:
                self._lose(f"{me} was lost: its claim expired or was taken over")
                return
            except Exception:  # noqa: BLE001 - a failed beat is tried again
                log.exception("run %s: node heartbeat failed; retrying", self.claim.run_id)

    def _check_peers(self) -> None:
        """Lose the gang when another node's claim expired or was taken over (its worker
        died, or was cut off); a released node ended its part itself and said why."""
        if not self.peers:
            return
        now = utcnow()
        rows = {n.node_rank: n for n in db.call(nodes.gang_of, self.claim.run_id)}
        for rank, (token, worker) in self.peers.items():
            row = rows.get(rank)
            if row is not None and row.lease != token:
                self._lose(f"node {rank} (worker {worker}) was lost: its claim was taken over")
            elif row is not None and row.expires_at <= now:
                self._lose(f"node {rank} (worker {worker}) was lost: no heartbeat for "
                           f"{_ttl():g} s (GRPO_STALE_AFTER_SECONDS)")  # fmt: skip

    def _lose(self, why: str) -> None:
        if not self.lost.is_set():
            self.why = why
            self.lost.set()
            log.warning("run %s: %s", self.claim.run_id, why)

    def leave(self) -> None:
        """Stop beating and release the node (the run ended, or the gang broke up)."""
        self._stop.set()
        db.call(nodes.release_node, self.claim)


def form(queued: Run, *, worker: str, stopping: threading.Event) -> Gang | None:
    """Claim a node of `queued` and wait for its gang: the gang, beating, once every node
    is claimed; None when no node was free, the run left the queue, or the gang did not
    form in time (then the node is released and its task sent back to the queue)."""
    settings = get_settings()
    address = settings.worker_address
    if address is None:  # the fit check declines such runs first
        return None
    claim = db.call(
        nodes.claim_node, queued.id, worker=worker, address=f"{address}:{free_port(address)}",
        ttl_seconds=_ttl(),
    )  # fmt: skip
    if claim is None:
        log.info("run %s: no node of it is free, or it is no longer queued", queued.id)
        return None
    count = nodes.num_nodes_of(queued)
    waiting = db.call(nodes.gang_wait, queued.id)
    _say(queued.id, f"worker {worker} claimed node {claim.node_rank} of {count}" + (
        f"; {waiting}" if waiting else ""))  # fmt: skip
    gang = Gang(claim, Nodes(count, "", claim.node_rank), worker)
    gang.start_beating()
    try:
        live = _wait_for_gang(gang, count, stopping=stopping)
    except BaseException:
        gang.leave()
        raise
    if live is None:
        gang.leave()
        return None
    gang.nodes = Nodes(count, str(live[0].address), claim.node_rank)
    gang.peers = {n.node_rank: (n.lease, n.worker) for n in live if n.node_rank != claim.node_rank}
    return gang


def _wait_for_gang(gang: Gang, count: int, *, stopping: threading.Event) -> list[RunNode] | None:
    """The nodes' claims once all `count` are claimed; None when the run left the
    queue, this worker stops, or the gang did not form in time (then said and sent back)."""
    run_id, timeout = gang.claim.run_id, get_settings().gang_formation_seconds
    deadline = time.monotonic() + timeout
    while not stopping.is_set() and not gang.lost.is_set():
        run = db.call(runs.get_run, run_id)
        if run is None or run.is_cancel_requested:
            return None
        live = db.call(nodes.live_nodes, run_id)
        if len(live) >= count and run.status in (RunStatus.QUEUED, RunStatus.RUNNING):
            return live  # running: node 0's worker saw the gang whole first and claimed it
        if run.status != RunStatus.QUEUED:
            return None
        if time.monotonic() > deadline:
            _say(run_id, f"the gang did not form within {timeout:g} s "
                 f"(GRPO_GANG_FORMATION_SECONDS): {db.call(nodes.gang_wait, run_id)}; worker "
                 f"{gang.worker} released node {gang.claim.node_rank} and sent the run back "
                 "to its queue")  # fmt: skip
            send_run(run_id, queue=run.queue)
            return None
        time.sleep(POLL_SECONDS)
    if stopping.is_set():  # a later worker takes its place
        run = db.call(runs.get_run, run_id)
        send_run(run_id, queue=run.queue if run else get_settings().default_queue)
    return None


def wait_for_leader(gang: Gang, *, stopping: threading.Event) -> Run | None:
    """On a node other than 0: the run once node 0's worker claimed it (running); None when
    it ended, or was not claimed within GRPO_GANG_FORMATION_SECONDS."""
    deadline = time.monotonic() + get_settings().gang_formation_seconds
    while not stopping.is_set() and time.monotonic() < deadline:
        run = db.call(runs.get_run, gang.claim.run_id)
        if run is None or run.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
            return None
        if run.status == RunStatus.RUNNING:
            return run
        time.sleep(POLL_SECONDS)
    return None


def _say(run_id: str, message: str) -> None:
    db.call(events.add_log, run_id, "info", message)
    log.info("run %s: %s", run_id, message)


def _ttl() -> float:
    return get_settings().stale_after_seconds


_led: dict[str, Gang] = {}  # the gang whose node 0 this worker holds, by run


def is_gang(queued: Run) -> bool:
    """Whether `queued` spans several machines (an invalid spec: no, it fails once claimed)."""
    try:
        return JobSpec.model_validate(queued.spec).resources.num_nodes > 1
    except ValueError:
        return False


def take_node(queued: Run, *, worker: str, stopping: threading.Event) -> bool:
    """This worker's node of a run on several machines: True when it holds node 0 of a
    formed gang, and is to claim and train the run as any run (its ranks launch as node 0
    until `leave_node`); False when it holds none (no node free, the gang did not form:
    said in the run's log) or it held another node, whose ranks it trained here."""
    formed = form(queued, worker=worker, stopping=stopping)
    if formed is None:
        return False
    if formed.is_leader:
        _led[queued.id] = formed
        leading[queued.id] = formed
        return True
    try:
        _follow(formed, JobSpec.model_validate(queued.spec), stopping=stopping)
    finally:
        try:
            formed.leave()
        except Exception:  # noqa: BLE001 - cut off from the store: the claim expires
            log.warning("run %s: node %d not released (the store did not answer); its claim "
                        "expires", queued.id, formed.claim.node_rank, exc_info=True)  # fmt: skip
    return False


def leave_node(run_id: str) -> None:
    """Release node 0 of `run_id` if this worker holds it (its run ended here)."""
    leading.pop(run_id, None)
    if (formed := _led.pop(run_id, None)) is not None:
        formed.leave()


def _follow(formed: Gang, spec: JobSpec, *, stopping: threading.Event) -> None:
    """Train this node's ranks of the run node 0's worker holds; how they ended goes to the
    run's log only (node 0's worker writes the run's status)."""
    node = f"node {formed.claim.node_rank} (worker {formed.worker})"
    run = wait_for_leader(formed, stopping=stopping)
    if run is None:
        log.info("run %s: %s: node 0 did not start it; released", formed.claim.run_id, node)
        return
    if not check_as_follower(formed, spec, run, stopping=stopping):
        log.info("run %s: %s: no rank started", run.id, node)
        return
    try:
        train_on_ranks(Lease.of(run), spec, stopping=stopping, gang=formed)
    except Exception as exc:  # noqa: BLE001 - node 0's worker ends the run
        log.warning("run %s: %s: its ranks ended: %s", run.id, node, exc)
        try:
            db.call(events.add_log, run.id, "warning", f"{node}: its ranks ended: "
                    f"{scrub(str(exc))}")  # fmt: skip
        except Exception:  # noqa: BLE001 - cut off from the store: said here only
            log.warning("run %s: the store did not take the line above", run.id, exc_info=True)
        return
    log.info("run %s: %s: its ranks finished", run.id, node)
