"""Before any rank of a run on several machines starts, its gang proves that its nodes see
the files they must share (issue 42 item 4), instead of assuming it.

The deployment's answer to "where do checkpoints go when the nodes share no disk" is a
shared directory it names (docs/how-to/scaling.md, "Storage the nodes must share"): rank
0 writes the checkpoints into the run's directory under its GRPO_DATA_DIR, and every rank
reads the latest at resume from the same path under its own; uploaded datasets lie under
GRPO_DATA_DIR too. Here each node writes a marker in the run's directory as its own
GRPO_DATA_DIR resolves it (`runs/<id>/nodes/node-N.json`), named by its claim in the store
(row and lease: no earlier claim's marker passes for it), with what it would start from:

- node 0 writes its marker once it claimed the run; every other node waits up to
  GRPO_GANG_STORAGE_SECONDS to see node 0's, then writes its own, saying whether it saw
  it, and marks its node `checked` in the store;
- node 0 waits for every node to be checked, then up to GRPO_GANG_STORAGE_SECONDS more to
  see each one's marker, and compares what they say; only then does it mark its node
  `running`, which is every node's signal to launch its ranks.

A node that does not see another's marker, cannot read an uploaded dataset the run uses,
holds a different built-in model, or would resume from another step fails the run at once
with one line naming the node, its worker, the path and what to share (NotShared): a
misconfigured deployment does not mend itself, so the run is not sent round the queue, and
no rank has started on any node. A node lost meanwhile (its claim expired, released or
taken over) hands the run back as any lost node does (GangBroke).

Decisions:

- Resume step: every node reports the step of the latest checkpoint it sees in the run's
  directory, and any that differs from node 0's fails the run. Node 0's is the run's (its
  rank 0 wrote it and the store recorded it); once the markers proved one directory, a
  node that sees another latest checkpoint sees a copy or a stale cache of it, whose
  ranks would train from other weights and break the gang steps later. Imposing node 0's
  step on it would need that checkpoint on its side, which it just showed it lacks.
- Built-in models are compared by content, not by where the cache lies: each node digests
  the built model in its own GRPO_CACHE_DIR, and a node whose digest is not node 0's fails
  the run, so a shared cache and a cache built once and copied to every node both pass,
  and two caches built apart (a warm-up trained on different hardware) do not. A node that
  has not built it yet passes: its ranks build it under the cache's file lock (once, on a
  shared cache), and failing it would fail a run on a shared cache whenever another run
  built the model between two nodes' looks. Separate caches built apart by this very run
  are compared at its next start.
- Uploaded datasets are compared by content as well (their bytes' digest): a node that
  cannot read one, or reads other bytes, fails the run.

Hub models and datasets (HF_HOME) and local paths (GRPO_MODEL_ROOTS) are not checked here.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from app.settings import get_settings
from grpo.checkpoints.files import latest_checkpoint, step_of
from grpo.models.builtin_names import builtin_dir_name, is_built
from grpo.spec import JobSpec
from grpo.spec.sources import parse_data_source, parse_model_name, uploaded_dataset_path

SHARE = 'docs/how-to/scaling.md, "Storage the nodes must share"'
NOT_BUILT = "not built"


class NotShared(Exception):  # noqa: N818 - the deployment's fault, said as the run's error
    """The nodes of a run on several machines do not see the same files: the run fails with
    this one line (which node, its worker, the path, what to share); no rank started."""


@dataclass
class Marker:
    """What one node says of its view of the files the nodes share."""

    node: int
    claim: str
    """`<row id>.<lease>` of its claim in the store: no other claim writes the same."""
    worker: str
    path: str
    """The marker's own path, as this node's GRPO_DATA_DIR resolves it."""
    resume_step: int
    """The step of the latest checkpoint it sees in the run's directory (0: none)."""
    sees_leader: bool | None = None
    """A node other than 0: whether it saw node 0's marker, at `leader_path`."""
    leader_path: str | None = None
    datasets: dict[str, str] = field(default_factory=dict)
    """Uploaded dataset id -> `sha256:<hex>` of its bytes, or `unreadable: <error>`."""
    model: str | None = None
    """Digest of the built-in model in its GRPO_CACHE_DIR (`not built` when absent); None
    when the run loads no built-in model."""
    model_dir: str | None = None


def claim_id(row_id: int, token: int) -> str:
    return f"{row_id}.{token}"


def who(node: int, worker: str) -> str:
    return f"node {node} (worker {worker})"


def marker_path(run_id: str, node: int) -> Path:
    """Node `node`'s marker in the run's directory, as this worker's GRPO_DATA_DIR has it."""
    return get_settings().runs_dir / run_id / "nodes" / f"node-{node}.json"


def own_marker(run_id: str, spec: JobSpec, *, node: int, claim: str, worker: str) -> Marker:
    """This node's view: its latest checkpoint, the run's uploaded datasets, its built-in
    model."""
    settings = get_settings()
    latest = latest_checkpoint(settings.runs_dir / run_id)
    model_dir = _builtin_dir(spec, settings.resolved_cache_dir)
    return Marker(
        node=node, claim=claim, worker=worker, path=str(marker_path(run_id, node)),
        resume_step=step_of(latest) if latest else 0,
        datasets={d: _digest_dataset(d, settings.datasets_dir) for d in uploaded_datasets(spec)},
        model=None if model_dir is None else _digest_dir(model_dir),
        model_dir=None if model_dir is None else str(model_dir),
    )  # fmt: skip


def write_marker(marker: Marker) -> None:
    """Written whole or not at all (a temp file renamed): a reader never sees half of it.
    OSError when the run's directory is not writable."""
    path = Path(marker.path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(asdict(marker)))
    os.replace(tmp, path)


def read_marker(path: Path, claim: str) -> Marker | None:
    """The marker at `path` if the claim `claim` wrote it (else None: none yet, or an
    earlier claim's)."""
    try:
        found = Marker(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return found if found.claim == claim else None


def uploaded_datasets(spec: JobSpec) -> list[str]:
    """The ids of the uploaded datasets (`dataset:<id>`) the run trains or evaluates on."""
    sources = {spec.data.source, spec.eval_data.source}
    parsed = [parse_data_source(s) for s in sorted(sources)]
    return [s.value for s in parsed if s.kind == "dataset"]


def _builtin_dir(spec: JobSpec, cache_dir: Path) -> Path | None:
    if parse_model_name(spec.model).kind != "builtin":
        return None
    return cache_dir / builtin_dir_name(spec.model)


def _digest_dataset(dataset_id: str, datasets_dir: Path) -> str:
    path = uploaded_dataset_path(dataset_id, datasets_dir)
    try:
        return _digest_file(path)
    except OSError as e:
        return f"unreadable: {e}"


def _digest_file(path: Path) -> str:
    with open(path, "rb") as handle:
        return f"sha256:{hashlib.file_digest(handle, 'sha256').hexdigest()}"


def _digest_dir(directory: Path) -> str:
    """The digest of every file under a built model's directory (names and bytes), or
    `not built` when it is not there yet."""
    if not is_built(directory):
        return NOT_BUILT
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(directory)).encode() + b"\0")
        digest.update(_digest_file(path).encode())
    return f"sha256:{digest.hexdigest()}"


def unseen(looker: str, path: Path | str, writer: str, seconds: float) -> str:
    """The line of a node that did not see another's marker."""
    return (
        f"{looker} does not see the marker {writer} wrote in the run's directory: it looked "
        f"for {path} for {seconds:g} s (GRPO_GANG_STORAGE_SECONDS); every node must see one "
        f"GRPO_DATA_DIR, on a filesystem they share ({SHARE}); no rank was started"
    )


def problem(leader: Marker, other: Marker, *, seconds: float) -> str | None:
    """The first way `other`'s view differs from node 0's (`leader`), as the run's one line;
    None when it sees what node 0 sees."""
    them, us = who(other.node, other.worker), who(leader.node, leader.worker)
    if other.sees_leader is False:
        return unseen(them, other.leader_path or "?", us, seconds)
    for dataset, digest in other.datasets.items():
        if digest.startswith("unreadable"):
            return (f"{them} cannot read the uploaded dataset {dataset!r}: {digest}; every "
                    f"node must see one GRPO_DATA_DIR (datasets/ under it) ({SHARE}); no rank "
                    "was started")  # fmt: skip
        if digest != leader.datasets.get(dataset):
            return (f"{them} reads other bytes for the uploaded dataset {dataset!r} than "
                    f"{us}; every node must see one GRPO_DATA_DIR (datasets/ under it) "
                    f"({SHARE}); no rank was started")  # fmt: skip
    if NOT_BUILT not in (other.model, leader.model) and other.model != leader.model:
        return (f"{them} holds {_model_words(other)}, {us} {_model_words(leader)}: every node "
                "must start from the same built-in model; share GRPO_CACHE_DIR, or build it "
                f"once and copy it to every node ({SHARE}); no rank was started")  # fmt: skip
    if other.resume_step != leader.resume_step:
        return (f"{them} would resume from {_step_words(other)}, {us} from "
                f"{_step_words(leader)}: every node must see node 0's checkpoints in one "
                f"GRPO_DATA_DIR ({SHARE}); no rank was started")  # fmt: skip
    return None


def _model_words(marker: Marker) -> str:
    return f"the built model {(marker.model or '')[:19]}... in {marker.model_dir}"


def _step_words(marker: Marker) -> str:
    run_dir = Path(marker.path).parent.parent
    if marker.resume_step == 0:
        return f"step 0 (no checkpoint in {run_dir / 'checkpoints'})"
    return f"step {marker.resume_step} (its latest checkpoint in {run_dir / 'checkpoints'})"
