"""Which spec fields a resume may not change, and the check that refuses when one did.

A checkpoint records the spec it was trained with (`spec.json`, beside the weights). A
resume (`grpo train edited.yaml --resume`, or a worker resuming a requeued run) with a
spec whose model, shapes or data order differ would silently train something else from
the saved state, so it is refused, naming the fields. Everything else (learning rate,
KL and clipping knobs, sampling temperature, max_steps, save_steps, logging, ...) may
change on resume. Knows nothing of torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grpo.spec import JobSpec

SPEC_FILE = "spec.json"
FIXED_ON_RESUME: tuple[str, ...] = (
    "model",  # the weights being resumed
    "lora",  # which parameters train, and the adapter's shapes
    "optim",  # the optimizer state's layout
    "seed",  # prompt order and every group's sampling stream
    "data.source",  # the prompts...
    "data.split",
    "data.prompt_field",
    "data.answer_field",
    "data.subset",  # an hf: source's config
    "prompts_per_step",  # ...and which of them fall in each step
    "dynamic_sampling",  # reserve prompts drawn per step
    "num_generations",  # group size G: every per-group shape
)
"""Fields that set the model, tensor shapes or the data order."""


def spec_json(spec: JobSpec) -> str:
    return json.dumps(spec.model_dump(mode="json"), indent=1, sort_keys=True)


def changed_fields(checkpoint: Path, spec: JobSpec) -> list[str]:
    """FIXED_ON_RESUME fields whose value differs from the checkpoint's spec, as
    'field (checkpoint X, now Y)'; [] for checkpoints written before specs were recorded."""
    path = Path(checkpoint) / SPEC_FILE
    if not path.is_file():
        return []
    saved, now = json.loads(path.read_text()), spec.model_dump(mode="json")
    changed = []
    for field in FIXED_ON_RESUME:
        before, after = _get(saved, field), _get(now, field)
        if before != after:
            changed.append(f"{field} (checkpoint {json.dumps(before)}, now {json.dumps(after)})")
    return changed


def check_resumable(checkpoint: Path, spec: JobSpec) -> None:
    """Raise ValueError naming every fixed field this spec changed since the checkpoint."""
    changed = changed_fields(checkpoint, spec)
    if changed:
        raise ValueError(
            f"cannot resume from {checkpoint}: {'; '.join(changed)}. These fields set the "
            "model, shapes or data order; restore them, or train from scratch in another workdir"
        )


def _get(data: dict[str, Any], dotted: str) -> Any:
    for key in dotted.split("."):
        data = data.get(key) if isinstance(data, dict) else None  # type: ignore[assignment]
    return data
