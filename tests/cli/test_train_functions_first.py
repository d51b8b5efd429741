"""`grpo train` checks each `python` reward and tool name against this host's entry points
and plugin folders before anything loads, beside the spec's other problems, as the API's
submit check does (issue 44's newcomer retry: an unknown reward was said only after
builtin:tiny-arith had been built, 41 s, and never with the spec's other problems)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo.cli.main import main
from grpo.cli.train import load_spec

SPEC = """\
name: typo
model: builtin:tiny-arith
max_steps: 1
rewards:
  - {name: python, function: solution_macth}
tools:
  - {name: python, function: calculater}
"""


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty plugin folder and an empty models cache."""
    monkeypatch.setenv("GRPO_PLUGIN_DIRS", str(tmp_path / "plugins"))
    monkeypatch.setenv("GRPO_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "plugins").mkdir()
    return tmp_path


def test_unknown_functions_are_said_with_the_other_problems_before_anything_loads(
    folders: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = folders / "spec.yaml"
    spec.write_text(SPEC + "num_generation: 4\n")
    assert main(["train", str(spec), "--workdir", str(folders / "run")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "error: invalid job spec:"
    assert lines[1].startswith("  num_generation: unknown field 'num_generation'")
    assert lines[2].startswith("  rewards.0.function: no reward function 'solution_macth'")
    assert "grpo plugins add FILE.py" in lines[2]
    assert lines[3].startswith("  tools.0.function: no tool 'calculater'")
    assert not (folders / "cache").exists()  # no model built or loaded

    spec.write_text(SPEC)  # alone, they are the whole answer
    assert main(["train", str(spec), "--workdir", str(folders / "run")]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "error",
        "  rewards.0.function",
        "  tools.0.function",
    ]
    assert not (folders / "cache").exists()


def test_a_function_in_the_plugin_folder_is_found(folders: Path) -> None:
    (folders / "plugins" / "mine.py").write_text(
        "def solution_macth(completions, **kw):\n    return [0.0 for _ in completions]\n\n"
        "def calculater(expression: str) -> str:\n"
        '    """Evaluate.\n\n    Args:\n        expression: the sum\n    """\n'
        "    return expression\n"
    )
    spec = folders / "spec.yaml"
    spec.write_text(SPEC)
    assert load_spec(spec).rewards[0].function == "solution_macth"
