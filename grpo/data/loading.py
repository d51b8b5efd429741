"""Prompts and reference answers: the built-in tasks (arith_task.py, code_task.py), JSONL
files, uploaded datasets and `datasets` hub sources; the per-step prompt order.

The order is a pure function of (examples, seed, step), so a run resumed at step k sees
exactly the prompts the uninterrupted run saw, without saved sampler state. Knows nothing
of models, HTTP or SQL.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

from grpo.data.arith_task import arith_examples
from grpo.data.code_task import code_examples
from grpo.data.example import Example
from grpo.data.parquet import is_parquet, parquet_records
from grpo.data.records import RecordError, parse_record
from grpo.data.tools_task import tools_examples
from grpo.spec.data import DataSpec
from grpo.spec.sources import LocalRoots, parse_data_source, resolve_local, uploaded_dataset_path


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


def file_examples(path: Path, data: DataSpec) -> list[Example]:
    """A parquet file's rows (by its magic bytes, whatever its name), or a JSONL file's
    lines; errors name the file and the row or line."""
    if not path.is_file():
        raise ValueError(f"dataset file {str(path)!r} does not exist")
    if not is_parquet(path):
        return jsonl_examples(path, data)
    examples = [
        _record_example(row, data, where=f"{path} row {i}", index=i)
        for i, row in enumerate(parquet_records(path), start=1)  # 1-based, as JSONL lines
    ]
    if not examples:
        raise ValueError(f"dataset is empty: {path}")
    return examples


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


def hub_examples(name: str, split: str, data: DataSpec) -> list[Example]:
    """`hf:<name>` (config `data.subset`) or `hf:<name>:<config>` through the `datasets`
    package, from the hub or, offline (HF_HUB_OFFLINE=1), the local hub cache."""
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
    rows = datasets.load_dataset(repo, config or data.subset, split=split)
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
        case "builtin" if source.value == "builtin:tools":
            return tools_examples(split)
        case "builtin" if source.value == "builtin:code":
            return code_examples(split)
        case "builtin":
            raise ValueError(f"unknown built-in task {source.value!r}")
        case "dataset":
            return file_examples(uploaded_dataset_path(source.value, datasets_dir), data)
        case "hub":
            return hub_examples(source.value, split, data)
    roots = roots or LocalRoots(base=Path.cwd(), allowed=None)
    return file_examples(resolve_local(source.value, roots, kind="data"), data)


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
