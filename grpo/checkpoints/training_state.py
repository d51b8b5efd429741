"""A trainer's state on disk: save it with the weights, restore it on resume, or clear old
checkpoints for a fresh start. The spec a checkpoint was trained with is checked before a
resume. Reads the trainer through TrainingParts, the attributes it needs, so it does not
import the trainer that calls it. Knows nothing of HTTP, SQL or Celery.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from grpo.checkpoints.files import (
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


class TrainingParts(Protocol):
    """What saving and restoring a run's state reads (and, on resume, sets) of its trainer."""

    spec: JobSpec
    workdir: Path
    model: Any
    tokenizer: Any
    device: torch.device
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    beta: float
    reference: ReferencePolicy | None
    ranks: Ranks
    log: Callable[[str, str], None]


def save_training(
    trainer: TrainingParts,
    step: int,
    fence: Callable[[], object],
    on_checkpoint: Callable[[SavedCheckpoint], object],
) -> int:
    """Weights, tokenizer, optimizer, schedule, beta (and a synced reference) at `step`.

    Sharded (FSDP) state is gathered whole first, on every rank (collectives), so the
    checkpoint is the one an unsharded run writes, whatever the world size."""
    weights = full_model_state(trainer.model) if is_sharded(trainer.model) else None
    state: dict[str, Any] = {
        "optimizer": optimizer_state(trainer.model, trainer.optimizer),
        "scheduler": trainer.scheduler.state_dict(),
        "beta": trainer.beta,
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
        spec_json=spec_json(trainer.spec),
        is_kept=is_final and trainer.spec.save_final,
    )
    trainer.log("info", f"checkpoint saved at step {step}: {path}")
    on_checkpoint(saved_checkpoint(path, is_final=is_final))
    return step


def start_fresh(trainer: TrainingParts) -> int:
    """Older checkpoints would otherwise win `latest` over this run's and poison a resume."""
    removed = remove_checkpoints(trainer.workdir) if trainer.ranks.is_main else 0
    if removed:
        trainer.log(
            "warning", f"resume=False: removed {removed} old checkpoint(s) in {trainer.workdir}"
        )
    return 0


def resume_training(trainer: TrainingParts) -> int:
    """Restore the latest checkpoint, if any; the step it was taken at (0 without one)."""
    path = latest_checkpoint(trainer.workdir)
    if path is None:
        return 0
    check_resumable(path, trainer.spec)
    state = load_checkpoint(path, model=trainer.model, device=trainer.device)
    load_optimizer_state(trainer.model, trainer.optimizer, state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    trainer.beta = float(state["beta"])
    if trainer.reference is not None and "reference" in state:
        trainer.reference.load_state_dict(state["reference"])
    trainer.log("info", f"resumed from checkpoint at step {state['step']}: {path}")
    return int(state["step"])
