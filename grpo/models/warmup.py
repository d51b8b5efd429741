"""The supervised warm-up that turns `builtin:tiny` into `builtin:tiny-arith`.

Seeded next-token cross-entropy on the answers of the built-in arithmetic task, stopped on
purpose at a middling accuracy: GRPO learns from groups in which some samples are right
and some wrong, and a model that is always right or always wrong gives all-equal groups
and zero advantage. The tiny model learns carries in a sudden jump whose timing varies
with the seed (and with the float rounding of each CPU), so the warm-up does not stop at
a fixed step: it stops when greedy accuracy on a held-out slice of the train split first
reaches TARGET_ACCURACY, which lands the same behaviour on every machine. Runs on the CPU
with one thread, once per machine (grpo/models/loading.py caches the result). A `Recipe`
says what differs for another base model (grpo/models/small_warmup.py: builtin:small in its
chat template); without one, the functions here run builtin:tiny-arith's. Knows nothing of
GRPO.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers import PreTrainedTokenizerBase as Tokenizer

from grpo.data.arith_task import arith_examples
from grpo.data.example import Example
from grpo.models.build_progress import BuildProgress, Log
from grpo.models.builtin_names import RECIPE_VERSION  # bump it when anything here changes

MEASURED_TEST_ACCURACY = 0.375
"""Greedy exact match on the builtin:arith test split when the recipe was set (stopped at
step 640; 45 s wall on a shared 2-core CPU). At temperature 1 with G=8 on train prompts:
29% of samples right, 80% of groups mixed, none all right. `warmup.json` in the cache
directory records what each machine's build got."""
SEED = 0
MAX_STEPS = 900
BATCH_SIZE = 64
LEARNING_RATE = 3e-3
WARMUP_STEPS = 50
EVAL_EVERY = 10
VALIDATION_SIZE = 300
"""The first examples of the train split: held out from the warm-up, used to stop it."""
TARGET_ACCURACY = 0.32
"""Stop at the first evaluation at or above this. Accuracy swings ±0.05 between
evaluations at that point of the climb; over seeds, test accuracy at the stop was 0.35-0.45."""
NUM_THREADS = 1
"""Tiny matmuls gain nothing from more threads, and a fixed count keeps the float
reduction order (and so the result) independent of the machine's core count."""


def encode_examples(examples: list[Example], tokenizer: Tokenizer) -> tuple[torch.Tensor, ...]:
    """`<s>prompt answer</s>`, right-padded; labels only on the answer and </s>."""
    eos = tokenizer.eos_token_id
    sequences = [tokenizer(f"{e.prompt}{e.answer}")["input_ids"] + [eos] for e in examples]
    starts = [len(tokenizer(e.prompt)["input_ids"]) for e in examples]
    return pad_with_labels(sequences, starts, tokenizer.pad_token_id)


def pad_with_labels(
    sequences: list[list[int]], answer_starts: list[int], pad_id: int
) -> tuple[torch.Tensor, ...]:
    """Input ids, attention mask and labels (-100 before each answer start and on the
    padding) of right-padded token sequences, each (N, T)."""
    length = max(map(len, sequences))
    input_ids = torch.full((len(sequences), length), pad_id)  # (N, T)
    attention_mask = torch.zeros((len(sequences), length), dtype=torch.long)  # (N, T)
    labels = torch.full((len(sequences), length), -100)  # (N, T)
    for i, (start, sequence) in enumerate(zip(answer_starts, sequences, strict=True)):
        input_ids[i, : len(sequence)] = torch.tensor(sequence)
        attention_mask[i, : len(sequence)] = 1
        labels[i, start : len(sequence)] = torch.tensor(sequence[start:])
    return input_ids, attention_mask, labels


def plain_prompt(example: Example, tokenizer: Tokenizer) -> str:
    """The prompt as written (`07+35=`): what builtin:tiny-arith continues."""
    return str(example.prompt)


def model_loss(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    labels: torch.Tensor,
) -> torch.Tensor:
    """The model's own next-token cross-entropy over the labelled positions."""
    loss: torch.Tensor = model(
        input_ids=input_ids, attention_mask=attention_mask, labels=labels
    ).loss
    return loss


@dataclass(frozen=True)
class Recipe:
    """One warm-up on the arithmetic task: how examples become tensors and prompts, the
    loss, the optimiser's schedule and the held-out accuracy it stops at."""

    name: str
    """The built-in model it makes (`builtin:tiny-arith`): progress lines name it."""
    version: str
    encode: Callable[[list[Example], Tokenizer], tuple[torch.Tensor, ...]]
    prompt: Callable[[Example, Tokenizer], str]
    loss: Callable[..., torch.Tensor]
    learning_rate: float
    target_accuracy: float
    max_steps: int = MAX_STEPS
    usual_steps: int = 640
    """Where it stopped when the recipe was set (the progress lines' 100%: the stop varies
    with the seed and the CPU, so a line never says more than 99% before the end)."""
    batch_size: int = BATCH_SIZE
    warmup_steps: int = WARMUP_STEPS


@torch.no_grad()
def greedy_accuracy(
    model: PreTrainedModel,
    tokenizer: Tokenizer,
    examples: list[Example],
    prompt: Callable[[Example, Tokenizer], str] = plain_prompt,
) -> float:
    """Fraction of examples whose greedy completion of `prompt` equals the answer exactly."""
    was_training = model.training
    model.eval()
    prompts = [prompt(e, tokenizer) for e in examples]
    batch = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left")
    max_answer = max(len(e.answer) for e in examples)
    # GenerationMixin.generate reaches mypy through nn.Module.__getattr__ (typed Tensor)
    output = model.generate(  # type: ignore[operator]
        **batch, max_new_tokens=max_answer + 1, do_sample=False, pad_token_id=tokenizer.pad_token_id
    )
    prompt_length = batch["input_ids"].shape[1]
    texts = tokenizer.batch_decode(output[:, prompt_length:], skip_special_tokens=True)
    model.train(was_training)
    return sum(t == e.answer for t, e in zip(texts, examples, strict=True)) / len(examples)


def train_until_target(
    model: PreTrainedModel,
    tokenizer: Tokenizer,
    *,
    progress: bool,
    log: Log | None = None,
    recipe: Recipe | None = None,
) -> tuple[int, float]:
    """Supervised steps until held-out accuracy reaches the recipe's target (or its
    max_steps); `log` hears the progress every few seconds (a run's page and `--follow`
    show it). Without a recipe: builtin:tiny-arith's.

    Returns the steps taken and the last held-out accuracy.
    """
    recipe = recipe or TINY_ARITH
    examples = arith_examples("train")
    validation, train = examples[:VALIDATION_SIZE], examples[VALIDATION_SIZE:]
    tensors = recipe.encode(train, tokenizer)
    generator = torch.Generator().manual_seed(SEED)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, betas=(0.9, 0.98))
    model.train()
    accuracy = 0.0
    bar = tqdm(range(1, recipe.max_steps + 1), desc=f"warm-up {recipe.name}", disable=not progress)
    said = BuildProgress(recipe.name, log)
    for step in bar:
        rows = torch.randint(len(train), (recipe.batch_size,), generator=generator)
        for group in optimizer.param_groups:
            group["lr"] = recipe.learning_rate * min(1.0, step / recipe.warmup_steps)
        loss = recipe.loss(model, *(t[rows] for t in tensors))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % EVAL_EVERY == 0:
            accuracy = greedy_accuracy(model, tokenizer, validation, recipe.prompt)
            bar.set_postfix(loss=f"{loss.item():.3f}", accuracy=f"{accuracy:.2f}")
            if accuracy >= recipe.target_accuracy:
                break
        usual = recipe.usual_steps
        said(
            min(step, usual - 1),
            usual,
            f"warm-up step {step} (usually ~{usual}), held-out accuracy {accuracy:.2f}, "
            f"done at {recipe.target_accuracy:.2f}",
        )
    said.finish(
        f"warm-up done at step {step}, held-out accuracy {accuracy:.2f}; testing and saving"
    )
    bar.close()
    model.eval()
    return step, accuracy


@contextmanager
def _seeded_single_thread() -> Iterator[None]:
    """Fixed thread count and seeds for the block; the caller's come back after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(NUM_THREADS)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            yield
    finally:
        torch.set_num_threads(threads)


def build_warmed_up(
    base_dir: Path,
    target: Path,
    *,
    progress: bool,
    log: Log | None = None,
    recipe: Recipe | None = None,
) -> None:
    """Warm up the model saved in `base_dir` by `recipe` (builtin:tiny-arith's when None);
    save it, its tokenizer and warmup.json (what this machine's build got) to `target`."""
    recipe = recipe or TINY_ARITH
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    with _seeded_single_thread():
        steps, validation_accuracy = train_until_target(
            model, tokenizer, progress=progress, log=log, recipe=recipe
        )
        test_accuracy = greedy_accuracy(model, tokenizer, arith_examples("test"), recipe.prompt)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    report = {
        "recipe_version": recipe.version,
        "steps": steps,
        "validation_accuracy": round(validation_accuracy, 4),
        "test_accuracy": round(test_accuracy, 4),
        "seconds": round(time.perf_counter() - started, 1),
    }
    (target / "warmup.json").write_text(json.dumps(report, indent=2) + "\n")


TINY_ARITH = Recipe(
    name="builtin:tiny-arith",
    version=RECIPE_VERSION,
    encode=encode_examples,
    prompt=plain_prompt,
    loss=model_loss,
    learning_rate=LEARNING_RATE,
    target_accuracy=TARGET_ACCURACY,
)
"""builtin:tiny on the prompts as written, every position through the model's own head."""
