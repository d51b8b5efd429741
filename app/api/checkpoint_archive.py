"""A checkpoint's `save_pretrained` directory as a `.tar.gz`, built once into a cache file.

The archive is built next to the run's checkpoints (`<run dir>/exports/`), once: one builder
at a time (single_flight.py), written to a temp file and renamed into place, and never
replaced, so every client of a checkpoint gets the same bytes and a download that is
resumed with `Range` reads the very bytes it started on. Merges also wait for a slot of a
small pool. Only regular files of the checkpoint's `model/` directory go in (no links),
and the checkpoint must lie inside the run's directory. A checkpoint is looked up by its
name under this server's run directory, not by the path its worker recorded: a worker on
another node may mount the shared data directory elsewhere. Knows nothing of HTTP or torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from app.api.single_flight import lock_path, merge_slots, single_flight
from app.store.models import Checkpoint

MODEL_DIR = "model"
"""The `save_pretrained` directory inside a checkpoint (grpo/checkpoints/files.py)."""
CHECKPOINTS_DIR = "checkpoints"
"""Where a run's checkpoints lie in its directory (grpo/checkpoints/files.py's checkpoint_root)."""


MERGE_TIMEOUT_S = 3600


class CheckpointGone(Exception):
    """The checkpoint's files are not on this server (pruned, or written on another host)."""


class MergeFailed(Exception):
    """The merge subprocess failed; the message is the end of what it printed."""


def checkpoint_dir(checkpoint: Checkpoint, run_dir: Path) -> Path:
    """The checkpoint's directory as this server sees it: its name under `run_dir`."""
    return run_dir / CHECKPOINTS_DIR / Path(checkpoint.path).name


def model_dir(checkpoint: Checkpoint, run_dir: Path) -> Path:
    """The checkpoint's `model/` directory, refused unless it resolves inside `run_dir`."""
    root = run_dir.resolve()
    directory = (checkpoint_dir(checkpoint, run_dir) / MODEL_DIR).resolve()
    if not directory.is_relative_to(root):
        raise CheckpointGone(f"checkpoint of step {checkpoint.step} is outside the run's directory")
    if not directory.is_dir():
        raise CheckpointGone(f"the files of the step {checkpoint.step} checkpoint are not here")
    return directory


def archive_name(run_id: str, checkpoint: Checkpoint, *, is_merged: bool = False) -> str:
    suffix = "-merged" if is_merged else ""
    return f"{run_id}-step-{checkpoint.step:06d}{suffix}.tar.gz"


def cached_archive(run_id: str, checkpoint: Checkpoint, run_dir: Path) -> Path:
    """The cached `.tar.gz` of the checkpoint's model directory, built if missing.

    The cache name carries the checkpoint's time, so a step written again is archived again.
    """
    source = model_dir(checkpoint, run_dir)
    target = run_dir.resolve() / "exports" / cache_name(checkpoint)
    if target.is_file():
        return target
    with single_flight(target):
        if not target.is_file():
            top = archive_name(run_id, checkpoint)[: -len(".tar.gz")]
            build_archive(source, target, top=top)
    return target


def cache_name(checkpoint: Checkpoint, *, is_merged: bool = False) -> str:
    stamp = int(checkpoint.created_at.timestamp() * 1000)
    return f"step-{checkpoint.step:06d}-{stamp}{'-merged' if is_merged else ''}.tar.gz"


def is_lora_checkpoint(checkpoint: Checkpoint, run_dir: Path) -> bool:
    return (model_dir(checkpoint, run_dir) / "adapter_config.json").is_file()


def cached_merged_archive(
    run_id: str, checkpoint: Checkpoint, run_dir: Path, *, merge_args: list[str]
) -> Path:
    """The `.tar.gz` of the LoRA checkpoint merged into full weights, built if missing by
    `python -m grpo.checkpoints.merge` in a subprocess (torch stays out of the API process)."""
    model_dir(checkpoint, run_dir)  # inside the run's directory, and present
    target = run_dir.resolve() / "exports" / cache_name(checkpoint, is_merged=True)
    if target.is_file():
        return target
    with single_flight(target):
        if not target.is_file():
            with merge_slots:
                _merge_into(run_id, checkpoint, run_dir, target, merge_args)
    return target


def _merge_into(
    run_id: str, checkpoint: Checkpoint, run_dir: Path, target: Path, merge_args: list[str]
) -> None:
    work = Path(tempfile.mkdtemp(prefix=".merge-", dir=target.parent))
    try:
        source = str(checkpoint_dir(checkpoint, run_dir))
        command = [sys.executable, "-m", "grpo.checkpoints.merge", source, str(work / "model")]
        done = subprocess.run(
            [*command, *merge_args], capture_output=True, text=True, timeout=MERGE_TIMEOUT_S
        )
        if done.returncode != 0:
            raise MergeFailed(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "")
        top = archive_name(run_id, checkpoint, is_merged=True)[: -len(".tar.gz")]
        build_archive(work / "model", target, top=top)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_archive(source: Path, target: Path, *, top: str) -> None:
    """Tar the regular files under `source` into `target` below the folder `top`, atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".tar.gz", dir=target.parent)
    try:
        # weights hardly compress: level 1 keeps the build close to disk speed
        with (
            os.fdopen(fd, "wb") as raw,
            tarfile.open(fileobj=raw, mode="w:gz", compresslevel=1) as tar,
        ):
            for path in sorted(source.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    tar.add(path, arcname=f"{top}/{path.relative_to(source)}", recursive=False)
        os.replace(tmp, target)
    except FileNotFoundError as exc:  # pruned while being read
        raise CheckpointGone(f"checkpoint files vanished while archiving: {exc.filename}") from exc
    finally:
        Path(tmp).unlink(missing_ok=True)


def prune_archives(run_dir: Path, checkpoints: list[Checkpoint]) -> None:
    """Remove cached archives of checkpoints no longer on the list (pruned or rewritten)."""
    keep = {cache_name(c, is_merged=m) for c in checkpoints for m in (False, True)}
    exports = run_dir.resolve() / "exports"
    if not exports.is_dir():
        return
    for path in exports.glob("step-*.tar.gz"):
        if path.name not in keep:
            path.unlink(missing_ok=True)
            lock_path(path).unlink(missing_ok=True)
