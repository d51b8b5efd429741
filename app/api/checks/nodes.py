"""The check on how many machines a run spans (`resources.num_nodes`): through the service a
run spans one machine for now. Workers do not yet form a gang of machines for one run
(issue 42: node claims, a rendezvous endpoint, whole-gang failure), so a run of several
nodes is refused at submit with a 422 naming the field, rather than queued where no worker
would ever take it or, worse, trained on one machine. From the command line the same spec
runs on several machines with `grpo train --nnodes` (grpo/cli/train.py).
"""

from __future__ import annotations

from app.api.checks.refusal import Problem, problem
from grpo.spec import JobSpec


def node_problems(spec: JobSpec) -> list[Problem]:
    nodes = spec.resources.num_nodes
    if nodes == 1:
        return []
    return [
        problem(
            "resources.num_nodes",
            f"is {nodes}, but runs on several machines through the service are not built yet "
            "(a run spans one worker's machine); use num_nodes 1 with up to a worker's "
            f"devices in num_processes, or train it from the command line: `grpo train "
            f"spec.yaml --nnodes {nodes} --rdzv-endpoint HOST:PORT --workdir SHARED_DIR` on "
            f"each of the {nodes} machines",
        )
    ]
