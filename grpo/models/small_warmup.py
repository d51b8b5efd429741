"""The supervised warm-up that turns `builtin:small` into `builtin:small-arith`.

The recipe of builtin:tiny-arith (grpo/models/warmup.py: seeded steps on the built-in
arithmetic task, stopped at a middling greedy held-out accuracy so that GRPO's groups are
mixed), with the examples in builtin:small's ChatML template, as a run with
`use_chat_template` renders them:

    <|im_start|>user\\n07+35=<|im_end|>\\n<|im_start|>assistant\\n  42<|im_end|>

Labels are on the answer and the `<|im_end|>` that ends the turn (a completion stops
there). Of the 32k-token head only the rows of those few labelled positions are computed:
in the whole-sequence head they were most of a step's time. Knows nothing of GRPO.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel
from transformers import PreTrainedTokenizerBase as Tokenizer

from grpo.data.example import Example
from grpo.models.builtin_names import SMALL_ARITH_VERSION  # bump it when anything here changes
from grpo.models.lm_head import decoder_and_head
from grpo.models.warmup import Recipe, pad_with_labels

SMALL_LEARNING_RATE = 1e-3
SMALL_TARGET_ACCURACY = 0.32
"""Held-out greedy accuracy the warm-up stops at (see warmup.TARGET_ACCURACY)."""


def chat_prompt(example: Example, tokenizer: Tokenizer) -> str:
    """The user turn holding the question and the opened assistant turn."""
    messages = [{"role": "user", "content": str(example.prompt)}]
    return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


def encode_chat_examples(examples: list[Example], tokenizer: Tokenizer) -> tuple[torch.Tensor, ...]:
    """chat prompt + answer + `<|im_end|>`, right-padded; labels on the answer and <|im_end|>."""
    prompts = [tokenizer(chat_prompt(e, tokenizer), add_special_tokens=False) for e in examples]
    answers = [
        tokenizer(e.answer + tokenizer.eos_token, add_special_tokens=False) for e in examples
    ]
    sequences = [p["input_ids"] + a["input_ids"] for p, a in zip(prompts, answers, strict=True)]
    starts = [len(p["input_ids"]) for p in prompts]
    return pad_with_labels(sequences, starts, tokenizer.pad_token_id)


def labelled_head_loss(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    labels: torch.Tensor,
) -> torch.Tensor:
    """Next-token cross-entropy over the labelled positions, the LM head run on those alone
    (hidden states -> select -> head): the model's own loss, without (N, T, 32k) logits."""
    decoder, head = decoder_and_head(model)
    hidden = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    targets = labels[:, 1:]  # (N, T-1): position t predicts token t+1
    keep = targets != -100
    logits = head(hidden[:, :-1][keep])  # (K, V)
    return F.cross_entropy(logits.float(), targets[keep])


SMALL_ARITH = Recipe(
    name="builtin:small-arith",
    version=SMALL_ARITH_VERSION,
    encode=encode_chat_examples,
    prompt=chat_prompt,
    loss=labelled_head_loss,
    learning_rate=SMALL_LEARNING_RATE,
    target_accuracy=SMALL_TARGET_ACCURACY,
    usual_steps=340,  # examples/small-arith-demo.yaml: 340 steps, 222 s on a shared 2-core CPU
)
"""builtin:small on the chat-rendered task, the head on the labelled positions only."""
