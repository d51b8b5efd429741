"""A trainer's state on disk: save it with the weights, restore it on resume, or clear old
checkpoints for a fresh start. The spec a checkpoint was trained with is checked before a
resume. Knows nothing of HTTP, SQL or Celery.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from grpo.checkpoint import (
    latest_checkpoint,
    load_checkpoint,
    remove_checkpoints,
    save_checkpoint,
    saved_checkpoint,
)
from grpo.report import SavedCheckpoint
from grpo.resume_spec import check_resumable, spec_json
from grpo.sharding import full_model_state, is_sharded, load_optimizer_state, optimizer_state

if TYPE_CHECKING:
    from grpo.trainer import Trainer


def save_training(
    trainer: Trainer,
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


def start_fresh(trainer: Trainer) -> int:
    """Older checkpoints would otherwise win `latest` over this run's and poison a resume."""
    removed = remove_checkpoints(trainer.workdir) if trainer.ranks.is_main else 0
    if removed:
        trainer.log(
            "warning", f"resume=False: removed {removed} old checkpoint(s) in {trainer.workdir}"
        )
    return 0


def resume_training(trainer: Trainer) -> int:
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
