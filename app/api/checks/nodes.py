"""The check of `resources.num_nodes` against the workers this service has (issue 42 item
1): a run on several machines needs that many distinct training workers, each with an
address the other machines reach it by (GRPO_WORKER_ADDRESS) and enough devices for its
node's ranks. A run no set of the workers that exist could ever hold is a 422 naming
`resources.num_nodes`; one they could hold is queued, and while they are busy or not yet
there its `waiting_for` says what it waits for (app/store/waiting.py).
"""

from __future__ import annotations

from app.api.checks.refusal import Problem, problem
from app.store import workers
from app.store.db import Session
from grpo.spec import JobSpec


def node_problems(spec: JobSpec, session: Session) -> list[Problem]:
    """Refuse a run of several nodes that fewer than `num_nodes` registered training workers
    could each hold a node of: listening on its queue, publishing an address and holding at
    least `num_processes` devices (app/store/workers.py's node_holders).

    The workers that "exist" are those registered in the worker table, live or not: a
    worker writes its row as it starts and deletes it when it stops cleanly, so one that
    died or lost the database keeps its row and still counts, since it may come back. A
    service with no training worker registered at all refuses nothing: it is starting
    (`grpo up` starts its worker after the API), and its runs are queued as runs of one
    machine are; the workers that come say why they leave it queued."""
    nodes, ranks = spec.resources.num_nodes, spec.resources.num_processes
    if nodes < 2:
        return []
    queue = spec.resources.queue
    holders = workers.node_holders(session, queue=queue, num_processes=ranks)
    if holders.registered == 0 or holders.able >= nodes:
        return []
    devices = f"{ranks} device{'s' if ranks > 1 else ''}"
    return [
        problem(
            "resources.num_nodes",
            f"is {nodes}, but only {holders.able} of this service's {holders.registered} "
            f"training workers could hold a node: one worker a node, each with "
            f"GRPO_WORKER_ADDRESS set, listening on queue {queue!r} and holding at least "
            f"{devices} (resources.num_processes; GET /api/workers lists them); start "
            f"{nodes - holders.able} more such worker{'s' if nodes - holders.able > 1 else ''} "
            "or lower num_nodes",
        )
    ]
