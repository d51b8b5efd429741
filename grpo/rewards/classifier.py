"""The sequence classifier of a `model` reward (grpo/rewards/model.py): it scores
prompt + completion.

Loaded once per run through `AutoModelForSequenceClassification` on the run's device, in
eval mode with gradients off: it is never trained and never in the policy's optimizer.
Texts go through the classifier's chat template when it has one, in batches of
`batch_size`, cut from the left to `max_length` tokens. Knows nothing of GRPO's update.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from grpo.data.records import Prompt
from grpo.models.loading import resolve_model_path
from grpo.rewards.batch import RewardBatch
from grpo.spec.rewards import ModelReward
from grpo.spec.sources import LocalRoots


class RewardModel:
    """A loaded classifier; `score` gives one float per completion of a batch."""

    def __init__(
        self, entry: ModelReward, *, device: Any, cache_dir: Path, roots: LocalRoots | None
    ) -> None:
        self.entry = entry
        self.device = device
        # a local path must lie inside the model roots, as the policy's must
        source = resolve_model_path(entry.model, cache_dir, progress=False, roots=roots)
        self.tokenizer = AutoTokenizer.from_pretrained(source)
        self.tokenizer.truncation_side = "left"  # the completion's end decides, keep it
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        model = AutoModelForSequenceClassification.from_pretrained(source)
        if model.config.pad_token_id is None:
            # the classifier reads the last non-pad token of each row; it must know the pad id
            model.config.pad_token_id = self.tokenizer.pad_token_id
        if entry.label_index >= model.config.num_labels:
            raise ValueError(
                f"reward {entry.label!r}: label_index {entry.label_index} but {entry.model} "
                f"has {model.config.num_labels} output(s)"
            )
        self.model = model.to(device).eval().requires_grad_(False)

    def text(self, prompt: Prompt, completion: str) -> str:
        """Prompt (text or the record's chat turns) and completion as the classifier reads them."""
        turns = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
        if getattr(self.tokenizer, "chat_template", None):
            messages = [*turns, {"role": "assistant", "content": completion}]
            return str(self.tokenizer.apply_chat_template(messages, tokenize=False))
        return "".join(m["content"] for m in turns) + completion

    @torch.inference_mode()
    def score_texts(self, texts: list[str]) -> list[float]:
        """logits[:, label_index] of every text, batch_size texts per forward pass."""
        scores: list[float] = []
        size = self.entry.batch_size
        for start in range(0, len(texts), size):
            encoded = self.tokenizer(
                texts[start : start + size],
                padding=True,
                truncation=True,
                max_length=self.entry.max_length,
                return_tensors="pt",
            ).to(self.device)
            logits = self.model(**encoded).logits  # (b, num_labels)
            scores.extend(logits[:, self.entry.label_index].float().tolist())
        return scores

    def score(self, batch: RewardBatch) -> list[float | None]:
        prompts = batch.per_completion([e.prompt for e in batch.examples])
        texts = [self.text(p, c) for p, c in zip(prompts, batch.completions, strict=True)]
        return list(self.score_texts(texts))
