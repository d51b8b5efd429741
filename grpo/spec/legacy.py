"""Spec fields that were renamed, mapped to their successors so stored specs still load.

`sync_ref_every: k` (copy the policy into the reference every k steps, 0 never) became
TRL's `sync_ref_model` / `ref_model_sync_steps` / `ref_model_mixup_alpha` (alpha 1 is a
copy). TRL's flat `vllm_importance_sampling_*` knobs became the `importance_correction`
section, which names no engine (grpo/spec/correction.py); specs stored or written with the
flat names load into it. Pure dict work.
"""

from __future__ import annotations

from typing import Any

from grpo.spec.correction import section_from_trl_names

_SUCCESSORS = ("sync_ref_model", "ref_model_sync_steps", "ref_model_mixup_alpha")


def map_legacy_fields(data: Any) -> Any:
    """The raw spec with `sync_ref_every` replaced by its TRL-named equivalent, and the
    flat vllm_importance_sampling_* knobs moved into `importance_correction`."""
    if not isinstance(data, dict):
        return data
    data = section_from_trl_names(data)
    if "sync_ref_every" not in data:
        return data
    data = dict(data)
    every = data.pop("sync_ref_every")
    if any(key in data for key in _SUCCESSORS):
        raise ValueError(
            "sync_ref_every is replaced by sync_ref_model and ref_model_sync_steps; give only those"
        )
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise ValueError(f"sync_ref_every must be an integer >= 0, got {every!r}")
    if every > 0:
        data.update(sync_ref_model=True, ref_model_sync_steps=every, ref_model_mixup_alpha=1.0)
    return data
