"""eval.holdout_fraction (grpo/data/holdout.py) and the spec rule that an eval on a source
with one split (an upload, a local file) names a held-out source."""

import pytest
from pydantic import ValidationError

from grpo.data.holdout import holdout_split
from grpo.spec import JobSpec
from grpo.spec.hints import worded_errors


@pytest.mark.parametrize(
    ("n", "fraction", "held"),
    [(10, 0.1, 1), (10, 0.25, 2), (7, 0.5, 4), (2, 0.01, 1), (2, 0.99, 1), (1000, 0.2, 200)],
)
def test_the_split_is_seeded_disjoint_and_whole(n, fraction, held):
    examples = [f"e{i}" for i in range(n)]
    train, evaluated = holdout_split(examples, fraction, seed=3)
    assert len(evaluated) == held and len(train) == n - held
    assert not set(train) & set(evaluated)
    assert sorted(train + evaluated) == sorted(examples)
    assert train == [e for e in examples if e in set(train)]  # the file's order
    assert holdout_split(examples, fraction, seed=3) == (train, evaluated)


def test_another_seed_holds_out_other_examples():
    examples = list(range(100))
    assert holdout_split(examples, 0.2, seed=0)[1] != holdout_split(examples, 0.2, seed=1)[1]


def test_no_fraction_trains_on_everything_and_one_example_cannot_split():
    assert holdout_split([1, 2, 3], None, seed=0) == ([1, 2, 3], [])
    with pytest.raises(ValueError, match="at least 2 examples"):
        holdout_split([1], 0.5, seed=0)


def eval_error(raw: dict) -> str:
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate(raw)
    rows = worded_errors(caught.value.errors(), JobSpec)
    return {r["loc"]: r["message"] for r in rows}["eval"]


@pytest.mark.parametrize(
    ("source", "what"),
    [("dataset:0123456789abcdef", "an uploaded dataset"), ("./prompts.jsonl", "a local file")],
)
def test_eval_on_a_one_split_source_names_a_held_out_source(source, what):
    message = eval_error({"data": {"source": source}, "eval": {"every_steps": 5}})
    assert message.startswith(f"data.source is {what}, which has one split")
    assert "eval.source" in message and "eval.holdout_fraction" in message


@pytest.mark.parametrize(
    "eval_section",
    [{"holdout_fraction": 0.1}, {"source": "dataset:fedcba9876543210"}],
)
def test_a_held_out_source_or_share_is_accepted(eval_section):
    spec = JobSpec.model_validate(
        {"data": {"source": "dataset:0123456789abcdef"}, "eval": eval_section}
    )
    assert spec.eval is not None


def test_builtin_and_hub_sources_have_their_test_split():
    assert JobSpec.model_validate({"eval": {}}).eval is not None  # builtin:arith
    assert JobSpec.model_validate({"data": {"source": "hf:org/name"}, "eval": {}}).eval


def test_holdout_fraction_is_not_for_another_source():
    with pytest.raises(ValidationError, match="with eval.source set, leave it out"):
        JobSpec.model_validate(
            {"eval": {"source": "dataset:fedcba9876543210", "holdout_fraction": 0.1}}
        )
