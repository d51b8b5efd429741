"""Spec errors that finish the sentence (grpo/spec/hints.py): an unknown field says what the
user may have meant, TRL's names say what they are here, bounds say why; `grpo train` prints
the same field list as the API's 422."""

import pytest
from pydantic import ValidationError

from grpo.cli import main as cli
from grpo.spec import JobSpec
from grpo.spec.hints import TRL_EQUIVALENTS, worded_errors


def fields_of(raw: dict) -> dict[str, str]:
    with pytest.raises(ValidationError) as caught:
        JobSpec.model_validate(raw)
    return {row["loc"]: row["message"] for row in worded_errors(caught.value.errors(), JobSpec)}


@pytest.mark.parametrize(
    ("raw", "loc", "says"),
    [
        # typos: the closest field names of the section the field is in
        ({"num_generation": 4}, "num_generation", "did you mean num_generations?"),
        ({"learning_rat": 1e-4}, "learning_rat", "did you mean learning_rate?"),
        ({"max_step": 10}, "max_step", "did you mean max_steps?"),
        ({"data": {"sorce": "builtin:arith"}}, "data.sorce", "did you mean source?"),
        ({"lora": {"rank": 8}}, "lora.rank", "fields here: alpha, dropout, r, target_modules"),
        ({"eval": {"every_step": 5}}, "eval.every_step", "did you mean every_steps?"),
        (
            {"rewards": [{"name": "format", "patern": "x"}]},
            "rewards.0.format.patern",
            "did you mean pattern?",
        ),
        # TRL GRPOConfig names
        ({"per_device_train_batch_size": 8}, "per_device_train_batch_size", "prompts_per_step"),
        ({"gradient_accumulation_steps": 4}, "gradient_accumulation_steps", "micro_batch_size"),
        ({"bf16": True}, "bf16", "precision: bf16"),
        ({"fp16": True}, "fp16", "precision: fp16"),
        ({"num_train_epochs": 1}, "num_train_epochs", "max_steps"),
        ({"reward_funcs": ["accuracy"]}, "reward_funcs", "rewards"),
        # TRL script arguments
        ({"model_name_or_path": "Qwen/Qwen2.5-0.5B"}, "model_name_or_path", "model"),
        ({"dataset_name": "gsm8k"}, "dataset_name", "data.source"),
        # TRL names that are ours too, but at the top level
        ({"data": {"learning_rate": 1e-5}}, "data.learning_rate", "top-level field"),
        ({"lora": {"beta": 0.1}}, "lora.beta", "top-level field"),
        # bounds with their reason
        ({"num_generations": 1}, "num_generations", "a group needs two completions to compare"),
        ({"prompts_per_step": 0}, "prompts_per_step", "a step needs a prompt"),
        ({"max_steps": 0}, "max_steps", "at least one step"),
    ],
)
def test_an_error_finishes_the_sentence(raw, loc, says):
    fields = fields_of(raw)
    assert says in fields[loc], fields


def test_an_unknown_field_with_nothing_close_lists_its_sections_fields():
    message = fields_of({"data": {"zzzz": 1}})["data.zzzz"]
    assert message.startswith("unknown field 'zzzz'; fields here: ")
    assert "prompt_field" in message and "source" in message


def test_a_bound_without_a_reason_is_left_as_pydantic_words_it():
    assert fields_of({"seed": -1})["seed"] == "Input should be greater than or equal to 0"


@pytest.mark.parametrize("name", sorted(TRL_EQUIVALENTS))
def test_every_trl_name_in_the_table_is_not_a_field_of_ours(name):
    fields = fields_of({name: 1})
    assert f"TRL's {name} is" in fields[name]


def test_grpo_train_prints_the_apis_field_list(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text("num_generation: 4\nnum_generations: 1\nbf16: true\n")
    assert cli.main(["train", str(spec), "--workdir", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: invalid job spec:\n")
    assert "  num_generation: unknown field 'num_generation'; did you mean num_generations?" in err
    assert "  num_generations: Input should be greater than or equal to 2: a group needs" in err
    assert "  bf16: unknown field 'bf16'; TRL's bf16 is precision: bf16 here" in err
