"""The Python API's spec handling (grpo/python_api.py): specs from objects, dicts and YAML
paths; callables named as `python` entries call them."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo.python_api import Trainer, function_names, load_spec, with_functions
from grpo.spec import JobSpec


def accuracy_reward(completions, solution, **kwargs):  # type: ignore[no-untyped-def]
    return [0.0] * len(completions)


def test_a_spec_is_an_object_a_dict_or_a_yaml_path(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("name: nb\nmax_steps: 3\n")
    assert load_spec(path) == load_spec({"name": "nb", "max_steps": 3}) == load_spec(str(path))
    spec = JobSpec(name="x")
    assert load_spec(spec) is spec


def test_functions_are_named_and_those_no_entry_names_are_added() -> None:
    functions = function_names([accuracy_reward, lambda **kw: [], lambda **kw: []])
    assert list(functions) == ["accuracy_reward", "reward_1", "reward_2"]
    spec = JobSpec(rewards=[{"name": "python", "function": "reward_1", "label": "judge"}])
    added = with_functions(spec, functions)
    assert [(r.name, r.label) for r in added.rewards] == [
        ("python", "judge"), ("python", "accuracy_reward"), ("python", "reward_2"),
    ]  # fmt: skip
    with pytest.raises(TypeError, match=r"reward_funcs\[0\] is int"):
        function_names([3])  # type: ignore[list-item]


def test_callables_train_on_one_process_only(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="num_processes must be 1"):
        Trainer({"resources": {"num_processes": 2}}, reward_funcs=[accuracy_reward])
    trainer = Trainer({"name": "nb"}, workdir=None)
    assert trainer.workdir == Path("runs") / "nb"  # as `grpo train`
