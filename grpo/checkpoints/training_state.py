"""A trainer's state on disk: save it with the weights, restore it on resume, or clear old
checkpoints for a fresh start. The spec a checkpoint was trained with is checked before a
resume. Given a frozen CheckpointContext (the parts whose state is saved), never the
trainer: what a resume restores that the trainer holds as a value (beta) is returned.
Knows nothing of HTTP, SQL or Celery.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from grpo.checkpoints.files import (
    RunMarks,
    latest_checkpoint,
    load_checkpoint,
    remove_checkpoints,
    save_checkpoint,
    saved_checkpoint,
)
from grpo.parallel.ranks import Ranks
from grpo.parallel.sharding import (
    full_model_state,
    is_sharded,
    load_optimizer_state,
    optimizer_state,
)
from grpo.report import SavedCheckpoint
from grpo.spec import JobSpec
from grpo.spec.resume import check_resumable, spec_json
from grpo.training.reference import ReferencePolicy


@dataclass(frozen=True)
class CheckpointContext:
    """What saving and restoring a run's state is given: the parts whose state is saved
    (their own state changes; the context does not) and where."""

    spec: JobSpec
    workdir: Path
    model: Any
    tokenizer: Any
    device: torch.device
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    reference: ReferencePolicy | None
    ranks: Ranks
    log: Callable[[str, str], None]


@dataclass(frozen=True)
class Resumed:
    """Where a resume starts: the checkpoint's step (0 without one) and its KL coefficient
    (None without one: the spec's beta)."""

    step: int
    beta: float | None = None


def save_training(
    trainer: CheckpointContext,
    step: int,
    beta: float,
    fence: Callable[[], object],
    on_checkpoint: Callable[[SavedCheckpoint], object],
) -> int:
    """Weights, tokenizer, optimizer, schedule, `beta` (and a synced reference) at `step`.

    Sharded (FSDP) state is gathered whole first, on every rank (collectives), so the
    checkpoint is the one an unsharded run writes, whatever the world size."""
    weights = full_model_state(trainer.model) if is_sharded(trainer.model) else None
    state: dict[str, Any] = {
        "optimizer": optimizer_state(trainer.model, trainer.optimizer),
        "scheduler": trainer.scheduler.state_dict(),
        "beta": beta,
    }
    if trainer.reference is not None and trainer.spec.sync_ref_model:
        state["reference"] = trainer.reference.state_dict()
    if not trainer.ranks.is_main:  # every rank holds the same state; rank 0 writes it
        return step
    is_final = step >= trainer.spec.max_steps
    path = save_checkpoint(
        trainer.workdir,
        step,
        model=trainer.model,
        weights=weights,
        tokenizer=trainer.tokenizer,
        state=state,
        before_rename=fence,
        marks=RunMarks(spec_json(trainer.spec), is_kept=is_final and trainer.spec.save_final),
    )
    trainer.log("info", f"checkpoint saved at step {step}: {path}")
    on_checkpoint(saved_checkpoint(path, is_final=is_final))
    return step


def start_fresh(trainer: CheckpointContext) -> Resumed:
    """Older checkpoints would otherwise win `latest` over this run's and poison a resume."""
    removed = remove_checkpoints(trainer.workdir) if trainer.ranks.is_main else 0
    if removed:
        trainer.log(
            "warning", f"resume=False: removed {removed} old checkpoint(s) in {trainer.workdir}"
        )
    return Resumed(0)


def resume_training(trainer: CheckpointContext) -> Resumed:
    """Restore the latest checkpoint, if any, into the parts; its step and beta."""
    path = latest_checkpoint(trainer.workdir)
    if path is None:
        return Resumed(0)
    check_resumable(path, trainer.spec)
    state = load_checkpoint(path, model=trainer.model, device=trainer.device)
    load_optimizer_state(trainer.model, trainer.optimizer, state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    if trainer.reference is not None and "reference" in state:
        trainer.reference.load_state_dict(state["reference"])
    trainer.log("info", f"resumed from checkpoint at step {state['step']}: {path}")
    return Resumed(int(state["step"]), float(state["beta"]))
