"""Prompts and reference answers: the built-in arithmetic task, JSONL files, uploaded
datasets and `datasets` hub sources; prompt formatting; the per-step prompt order.

The order is a pure function of (examples, seed, step), so a run resumed at step k sees
exactly the prompts the uninterrupted run saw, without saved sampler state. Knows nothing
of models, HTTP or SQL.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo.data_spec import DataSpec
from grpo.records import ChatMessage, Prompt, RecordError, parse_record
from grpo.sources import LocalRoots, parse_data_source, resolve_local

ARITH_SEED = 20240101
ARITH_MAX_OPERAND = 49
"""Operands are 0..49, written with two digits (`07+35=`); operators are + and - with
a >= b, so answers are plain non-negative integers. Aligned digit positions are what let
the 300k-parameter built-in model learn carries in seconds (unpadded operands, or 0..99,
left it on a 10% plateau for 1,000 steps in some seeds)."""
ARITH_OPERATORS = ("+", "-")
ARITH_TEST_SIZE = 400

R1_TEMPLATE = (
    "A conversation between User and Assistant. The user asks a question, and the "
    "Assistant solves it. The Assistant first thinks about the reasoning process in the "
    "mind and then provides the User with the answer. The reasoning process and answer "
    "are enclosed within <think> </think> and <answer> </answer> tags, respectively, i.e., "
    "<think> reasoning process here </think> <answer> answer here </answer>. "
    "User: {prompt}. Assistant:"
)
"""DeepSeek-R1-Zero's training template (DeepSeek-AI 2025, Table 1); `{prompt}` is replaced."""


@dataclass(frozen=True)
class Example:
    """One prompt with its reference answer; `id` is stable within its source."""

    id: str
    prompt: Prompt
    """Text, or chat messages rendered with the model's chat template (records.py)."""
    answer: str
    data: dict[str, Any] = dataclasses.field(default_factory=dict, hash=False, compare=False)
    """Every other field of the record, handed to reward functions (tests, metadata)."""


def arith_problems() -> list[tuple[int, str, int]]:
    """Every (a, op, b) problem of the task, in one seeded order (train and test cut it)."""
    problems = [
        (a, op, b)
        for op in ARITH_OPERATORS
        for a in range(ARITH_MAX_OPERAND + 1)
        for b in range(ARITH_MAX_OPERAND + 1)
        if op == "+" or a >= b
    ]
    random.Random(ARITH_SEED).shuffle(problems)
    return problems


def arith_examples(split: str) -> list[Example]:
    """The built-in task: `23+45=` → `68`, `07-03=` → `4`. Test is the first
    ARITH_TEST_SIZE problems of the seeded order, train the rest."""
    problems = arith_problems()
    match split:
        case "test":
            chosen = problems[:ARITH_TEST_SIZE]
        case "train":
            chosen = problems[ARITH_TEST_SIZE:]
        case _:
            raise ValueError(f"builtin:arith has splits 'train' and 'test', not {split!r}")
    examples = []
    for a, op, b in chosen:
        answer = a + b if op == "+" else a - b
        problem = f"{a:02d}{op}{b:02d}"
        examples.append(Example(id=problem, prompt=f"{problem}=", answer=str(answer)))
    return examples


def _record_example(record: Any, data: DataSpec, *, where: str, index: int) -> Example:
    parsed = parse_record(
        record, prompt_field=data.prompt_field, answer_field=data.answer_field, where=where
    )
    return Example(
        id=str(record.get("id", index)),
        prompt=parsed.prompt,
        answer=parsed.answer,
        data=parsed.data,
    )


def jsonl_examples(path: Path, data: DataSpec) -> list[Example]:
    """One example per non-blank line; errors name the file and the line."""
    if not path.is_file():
        raise ValueError(f"dataset file {str(path)!r} does not exist")
    examples = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise RecordError(f"{where}: invalid JSON ({exc.msg})") from exc
            examples.append(_record_example(record, data, where=where, index=line_no))
    if not examples:
        raise ValueError(f"dataset is empty: {path}")
    return examples


def uploaded_dataset_path(dataset_id: str, datasets_dir: Path | None) -> Path:
    """`datasets_dir/<id>.jsonl`; the id pattern keeps the path inside datasets_dir."""
    if datasets_dir is None:
        raise ValueError("dataset:<id> sources need a datasets directory")
    source = parse_data_source(f"dataset:{dataset_id}")
    return Path(datasets_dir) / f"{source.value}.jsonl"


def hub_examples(name: str, split: str, data: DataSpec) -> list[Example]:
    """`hf:<name>` or `hf:<name>:<config>` through the `datasets` package."""
    try:
        import datasets  # optional: only hub sources need it
    except ImportError as exc:
        raise ValueError(
            f"source hf:{name} needs the `datasets` package (pip install datasets)"
        ) from exc
    repo, _, config = name.partition(":")
    if os.path.lexists(repo):
        # `datasets` would read a same-named directory under the working directory instead
        raise ValueError(f"cannot load hf:{name} from the Hugging Face hub or cache here")
    rows = datasets.load_dataset(repo, config or None, split=split)
    examples = [
        _record_example(row, data, where=f"hf:{name}[{split}] row {i}", index=i)
        for i, row in enumerate(rows)
    ]
    if not examples:
        raise ValueError(f"dataset is empty: hf:{name}[{split}]")
    return examples


def load_examples(
    data: DataSpec,
    *,
    split: str | None = None,
    datasets_dir: Path | None = None,
    roots: LocalRoots | None = None,
) -> list[Example]:
    """Examples of `data.source` (split defaults to `data.split`; single files have one).

    A local path must lie inside `roots` (relative ones resolve against `roots.base`);
    without roots the caller is trusted and relative paths are the working directory's."""
    split = split or data.split
    source = parse_data_source(data.source)
    match source.kind:
        case "builtin" if source.value == "builtin:arith":
            return arith_examples(split)
        case "builtin" if source.value == "builtin:code":
            from grpo.code_task import code_examples  # code_task builds on Example, defined here

            return code_examples(split)
        case "builtin":
            raise ValueError(f"unknown built-in task {source.value!r}")
        case "dataset":
            return jsonl_examples(uploaded_dataset_path(source.value, datasets_dir), data)
        case "hub":
            return hub_examples(source.value, split, data)
    roots = roots or LocalRoots(base=Path.cwd(), allowed=None)
    return jsonl_examples(resolve_local(source.value, roots, what="data.source"), data)


def has_chat_template(data: DataSpec, tokenizer: Any) -> bool:
    """Whether prompts are rendered with the tokenizer's chat template."""
    return data.use_chat_template and bool(getattr(tokenizer, "chat_template", None))


def prompt_messages(example: Example, data: DataSpec) -> list[ChatMessage]:
    """The prompt as chat turns: a string is one user turn; the prompt template fills the
    last user turn (the question), so a system turn stays as the record wrote it."""
    if isinstance(example.prompt, str):
        return [{"role": "user", "content": fill_template(data, example.prompt)}]
    messages = [dict(m) for m in example.prompt]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if users:
        messages[users[-1]]["content"] = fill_template(data, messages[users[-1]]["content"])
    return messages


def fill_template(data: DataSpec, text: str) -> str:
    # replace, not str.format: user prompts may hold braces
    return data.prompt_template.replace("{prompt}", text)


def format_prompt(example: Example, data: DataSpec, tokenizer: Any) -> str:
    """The policy's text: the template filled in, then the chat template if asked and present
    (with the generation prompt that opens the assistant's turn). Chat-message prompts need
    the chat template."""
    if not has_chat_template(data, tokenizer):
        if not isinstance(example.prompt, str):
            raise ValueError(_unrenderable(example, data))
        return fill_template(data, example.prompt)
    rendered = tokenizer.apply_chat_template(
        prompt_messages(example, data), tokenize=False, add_generation_prompt=True
    )
    return str(rendered)


def check_prompts_render(examples: list[Example], data: DataSpec, tokenizer: Any) -> None:
    """Fail before the first step when chat-message prompts meet no chat template."""
    if has_chat_template(data, tokenizer):
        return
    for example in examples:
        if not isinstance(example.prompt, str):
            raise ValueError(_unrenderable(example, data))


def _unrenderable(example: Example, data: DataSpec) -> str:
    why = "the model's tokenizer has no chat template"
    if not data.use_chat_template:
        why = "data.use_chat_template is false"
    return f"prompt {example.id!r} is a list of chat messages, but {why}"


def epoch_order(num_examples: int, *, seed: int, epoch: int) -> list[int]:
    """A seeded permutation of 0..n-1 for one epoch (str seeds hash with SHA-512: stable)."""
    order = list(range(num_examples))
    random.Random(f"grpo-data:{seed}:{epoch}").shuffle(order)
    return order


class PromptSampler:
    """Batch k = positions (k-1)·B .. k·B-1 of the endless sequence of seeded epochs."""

    def __init__(self, examples: list[Example], *, batch_size: int, seed: int) -> None:
        if not examples:
            raise ValueError("dataset is empty")
        self.examples = examples
        self.batch_size = batch_size
        self.seed = seed
        self._orders: dict[int, list[int]] = {}

    def _order(self, epoch: int) -> list[int]:
        if epoch not in self._orders:
            self._orders = {epoch: epoch_order(len(self.examples), seed=self.seed, epoch=epoch)}
        return self._orders[epoch]

    def batch(self, step: int) -> list[Example]:
        """The B examples of 1-based `step` (the numbering of StepReport.step)."""
        if step < 1:
            raise ValueError(f"steps are 1-based, got {step}")
        n = len(self.examples)
        start = (step - 1) * self.batch_size
        batch = []
        for position in range(start, start + self.batch_size):
            epoch, offset = divmod(position, n)
            batch.append(self.examples[self._order(epoch)[offset]])
        return batch


def load_nonempty(
    data: DataSpec, datasets_dir: Path | None, roots: LocalRoots | None
) -> list[Example]:
    """load_examples, refusing a source that yields none."""
    examples = load_examples(data, datasets_dir=datasets_dir, roots=roots)
    if not examples:
        raise ValueError(f"dataset {data.source!r} split {data.split!r} has no examples")
    return examples
