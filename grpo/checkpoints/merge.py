"""`python -m grpo.checkpoints.merge <checkpoint> <out>`: a LoRA checkpoint's adapter merged
into its base model, saved as full weights with the tokenizer (what `merge=true` downloads serve).

The base model is the one the run trained: the checkpoint's `spec.json` names it, resolved
as the worker resolved it (built-ins from the cache, local paths inside the model roots).
The API runs this in a subprocess so that it never imports torch itself.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from grpo.checkpoints.files import load_weights
from grpo.models.loading import load_policy
from grpo.models.lora import apply_lora
from grpo.spec import JobSpec
from grpo.spec.sources import LocalRoots


def merge_checkpoint(
    checkpoint: Path, out: Path, *, cache_dir: Path, roots: LocalRoots | None
) -> None:
    """W' = W + (alpha / r) B A for every adapted layer (Hu et al. 2021, arXiv:2106.09685),
    via peft's merge_and_unload."""
    spec = JobSpec.model_validate(json.loads((checkpoint / "spec.json").read_text()))
    if spec.lora is None:
        raise ValueError(f"{checkpoint} is not a LoRA checkpoint: its model is full weights")
    base, tokenizer = load_policy(spec.model, cache_dir=cache_dir, progress=False, roots=roots)
    model = apply_lora(base, spec.lora)
    load_weights(model, checkpoint / "model")
    merged = model.merge_and_unload()
    merged.save_pretrained(out)
    tokenizer.save_pretrained(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grpo.checkpoints.merge")
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--cache-dir", type=Path, required=True)
    parser.add_argument("--base", type=Path, required=True, help="what relative paths resolve to")
    parser.add_argument("--model-root", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    roots = LocalRoots(args.base, tuple(args.model_root))
    merge_checkpoint(args.checkpoint, args.out, cache_dir=args.cache_dir, roots=roots)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
