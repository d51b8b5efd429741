"""Every reward kind, found by the `name` of an entry (the discriminator of
grpo/spec/rewards.py's RewardSpec union): one line per kind (grpo/rewards/kind.py says what
a kind is). Imports without torch: the API checks entries with it, the worker scores them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpo.rewards.code import CODE
from grpo.rewards.http import HTTP
from grpo.rewards.judge import JUDGE
from grpo.rewards.kind import RewardKind
from grpo.rewards.model import MODEL
from grpo.rewards.multi import MULTI
from grpo.rewards.python import PYTHON
from grpo.rewards.rules import RULE_KINDS
from grpo.spec import JobSpec
from grpo.spec.rewards import RewardSpec

REWARD_KINDS: dict[str, RewardKind[Any]] = {
    kind.name: kind for kind in (*RULE_KINDS, PYTHON, HTTP, JUDGE, MODEL, CODE, MULTI)
}


def kind_of(entry: RewardSpec) -> RewardKind[Any]:
    """The kind of a reward entry (every entry of a valid spec has one)."""
    return REWARD_KINDS[entry.name]


def answer_refusals(spec: JobSpec) -> list[tuple[str, str]]:
    """(`rewards.<i>`, why) for each entry that needs a reference answer a spec without one
    cannot give: `data.answer_field` null (and, for `eval.rewards`, no `eval.answer_field`)."""
    found = []
    sections: list[tuple[str, Sequence[RewardSpec], str | None]] = [
        ("rewards", spec.rewards, spec.data.answer_field)
    ]
    if spec.eval is not None:
        answer_field = spec.eval.answer_field or spec.data.answer_field
        sections.append(("eval.rewards", spec.eval.rewards or spec.rewards, answer_field))
    for prefix, entries, answer_field in sections:
        for i, entry in enumerate(entries):
            if answer_field is None and kind_of(entry).needs_answer:
                why = (
                    f"reward {entry.name!r} compares completions with a reference answer, "
                    "but data.answer_field is null: name the answer column, or use rewards "
                    "that need none (format, length, regex, python, http, model, code)"
                )
                found.append((f"{prefix}.{i}", why))
    return found


def check_answers_present(spec: JobSpec) -> None:
    """ValueError naming the first entry that needs a reference answer the data lacks."""
    for loc, why in answer_refusals(spec)[:1]:
        raise ValueError(f"{loc}: {why}")
