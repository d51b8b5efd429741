"""Checkpoints under `workdir/checkpoints/step-NNNNNN/`: weights, optimizer, RNG, step.

`model/` is a `save_pretrained` directory (full weights, or only the LoRA adapter) with the
tokenizer, so `grpo eval --model <checkpoint>/model` and any Auto class can load it;
`trainer_state.pt` holds what exact resumption needs. A checkpoint is written to a temp
directory and renamed into place, so a crash never leaves a half-written latest one.
Knows nothing of the GRPO math.
"""

from __future__ import annotations

import errno
import random
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from grpo.failures import OutOfSpace
from grpo.models.lora import is_lora
from grpo.parallel.sharding import is_sharded, load_full_model_state
from grpo.report import SavedCheckpoint

KEEP_CHECKPOINTS = 3
"""Older checkpoints are deleted once a newer one is complete, except kept ones."""
KEPT_MARK = "KEPT"
"""A file in a checkpoint that the rotation never deletes (spec save_final)."""
_STEP_DIR = re.compile(r"^step-(\d+)$")
LOW_SPACE_BYTES = 1 << 20
"""A write that failed with less than this free on its disk failed for space."""


def checkpoint_root(workdir: Path) -> Path:
    return Path(workdir) / "checkpoints"


def latest_checkpoint(workdir: Path) -> Path | None:
    """The complete checkpoint with the highest step, if any."""
    found = _complete_checkpoints(checkpoint_root(workdir))
    return found[-1] if found else None


@dataclass(frozen=True)
class RunMarks:
    """What a checkpoint keeps of its run besides weights and state."""

    spec_json: str | None = None
    """The spec it was trained with, kept as `spec.json` for resume checks (grpo/spec/resume.py)."""
    is_kept: bool = False
    """No later pruning deletes this one (KEPT_MARK; spec save_final)."""


def save_checkpoint(
    workdir: Path,
    step: int,
    *,
    model: Any,
    tokenizer: Any,
    state: dict[str, Any],
    weights: dict[str, torch.Tensor] | None = None,
    before_rename: Callable[[], object] = lambda: None,
    marks: RunMarks = RunMarks(),
) -> Path:
    """Write step's checkpoint atomically and prune old ones; returns its directory.

    `marks`: what of its run the checkpoint keeps (RunMarks).
    `before_rename` may raise to abandon the write (a worker that lost its run must not
    replace or prune the new owner's checkpoints); the temp directory is then removed.
    `weights`: the full state dict to write instead of the model's own (a sharded model's,
    gathered).
    """
    root = checkpoint_root(workdir)
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"step-{step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".step-{step:06d}-", dir=root))
    try:
        with _space_named(root, step), _quiet_progress():
            extra = {} if weights is None else {"state_dict": weights}
            model.save_pretrained(tmp / "model", **extra)
            tokenizer.save_pretrained(tmp / "model")
            torch.save({**state, "step": step, "rng": rng_state()}, tmp / "trainer_state.pt")
            if marks.spec_json is not None:
                (tmp / "spec.json").write_text(marks.spec_json)
            if marks.is_kept:
                (tmp / KEPT_MARK).touch()
        before_rename()
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for old in _complete_checkpoints(root)[:-KEEP_CHECKPOINTS]:
        if not (old / KEPT_MARK).exists():
            shutil.rmtree(old, ignore_errors=True)
    return target


@contextmanager
def _space_named(root: Path, step: int) -> Iterator[None]:
    """A write that failed for space says so: ENOSPC/EDQUOT, or any failure (torch's
    "unexpected pos") with under LOW_SPACE_BYTES left on the disk, is OutOfSpace."""
    try:
        yield
    except (OSError, RuntimeError) as exc:
        free = shutil.disk_usage(root).free
        is_errno = isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
        if not is_errno and free >= LOW_SPACE_BYTES:
            raise
        raise OutOfSpace(
            f"no space left on device: the checkpoint of step {step} could not be written "
            f"under {root} ({free} bytes free); free space or point GRPO_DATA_DIR elsewhere"
        ) from exc


def saved_checkpoint(path: Path, *, is_final: bool) -> SavedCheckpoint:
    """What save_checkpoint left at `path`, and which checkpoints its pruning kept."""
    kept = [step_of(p) for p in _complete_checkpoints(path.parent)]
    num_bytes = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return SavedCheckpoint(step_of(path), str(path), num_bytes, is_final, tuple(kept))


def step_of(path: Path) -> int:
    """The step of the checkpoint directory `path` (`step-NNNNNN`)."""
    match = _STEP_DIR.match(path.name)
    assert match, path
    return int(match.group(1))


def load_checkpoint(path: Path, *, model: Any, device: torch.device) -> dict[str, Any]:
    """Load weights into `model` in place and return the trainer state (RNG restored)."""
    load_weights(model, Path(path) / "model")
    state: dict[str, Any] = torch.load(
        Path(path) / "trainer_state.pt", map_location=device, weights_only=False
    )
    set_rng_state(state["rng"])
    return state


def load_weights(model: Any, directory: Path) -> None:
    """Copy saved weights (full model or LoRA adapter) into an already built model."""
    if is_lora(model):
        from peft import set_peft_model_state_dict
        from peft.utils import load_peft_weights

        set_peft_model_state_dict(model, load_peft_weights(str(directory)))
        return
    from safetensors.torch import load_file

    weights: dict[str, torch.Tensor] = {}
    for file in sorted(directory.glob("*.safetensors")):
        weights.update(load_file(str(file)))
    if is_sharded(model):
        missing, unexpected = load_full_model_state(model, weights)
    else:
        missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = getattr(model.config, "tie_word_embeddings", False)
    missing = [k for k in missing if not (tied and k.endswith("lm_head.weight"))]
    if missing or unexpected:
        raise ValueError(
            f"checkpoint {directory} does not fit the model: missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}"
        )


def remove_checkpoints(workdir: Path) -> int:
    """Delete every checkpoint of the workdir; returns how many there were."""
    found = _complete_checkpoints(checkpoint_root(workdir))
    for path in found:
        shutil.rmtree(path)
    return len(found)


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"].cpu())
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


@contextmanager
def _quiet_progress() -> Iterator[None]:
    """No "Writing model shards" bar in the middle of the training progress bar."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


def _complete_checkpoints(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), p)
        for p in root.iterdir()
        if (m := _STEP_DIR.match(p.name)) and (p / "trainer_state.pt").is_file()
    ]
    return [p for _, p in sorted(found)]
