"""The one rule for YAML a user hands us (grpo/spec/yaml_input.py): what a spec or a TRL
recipe needs loads exactly as PyYAML's safe loader loads it; anchors, aliases, deep nesting,
oversized documents and integers past Python's digit limit are refused with the line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.cli_client import patch_of, submit
from grpo.cli import main as cli
from grpo.client import GrpoClient
from grpo.python_api import load_spec
from grpo.spec.yaml_input import MAX_CHARS, MAX_DEPTH, YamlRefused, load_yaml

ROOT = Path(__file__).parents[2]


def billion_laughs(levels: int) -> str:
    """The 'billion laughs' of issue 38: each level ten aliases of the one before (x10)."""
    lines = ['lol0: &l0 "lol"']
    for level in range(1, levels + 1):
        refs = ",".join([f"*l{level - 1}"] * 10)
        lines.append(f"lol{level}: &l{level} [{refs}]")
    lines.append(f"system_prompt: *l{levels}")
    return "\n".join(lines) + "\n"


SHIPPED = sorted([*ROOT.glob("examples/*.yaml"), *(ROOT / "tests/data/trl_recipes").glob("*.yaml")])


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_spec_and_recipe_loads_as_the_safe_loader_loads_it(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert load_yaml(text) == yaml.safe_load(text)


def test_aliases_are_refused_with_their_line_before_anything_expands() -> None:
    bomb = billion_laughs(7)
    assert len(bomb) < 1000
    with pytest.raises(YamlRefused, match=r"config: line 1: YAML anchor &l0 is not accepted"):
        load_yaml(bomb, source="config")
    with pytest.raises(YamlRefused, match=r"line 3: YAML alias \*base is not accepted"):
        load_yaml("a: 1\nb: 2\nc: *base\n")
    with pytest.raises(YamlRefused, match="anchor &x"):  # a merge key needs one too
        load_yaml("base: &x {beta: 0}\nrun:\n  <<: *x\n")


def test_depth_size_and_digits_are_bounded() -> None:
    deep = "a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n"
    with pytest.raises(YamlRefused, match=f"line 1: nested deeper than {MAX_DEPTH}"):
        load_yaml(deep)
    assert load_yaml("a: " + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)) is not None
    with pytest.raises(YamlRefused, match="characters, more than"):
        load_yaml("a: " + "x" * MAX_CHARS)
    with pytest.raises(YamlRefused, match="digits"):  # a ValueError of int(), not a crash
        load_yaml("seed: " + "9" * 5000)
    with pytest.raises(YamlRefused, match="spec.yaml: not YAML"):
        load_yaml("a: [unclosed", source="spec.yaml")
    with pytest.raises(YamlRefused, match="not YAML: unacceptable character #x0093"):
        load_yaml("\u00dcZ[\u0093g\u0084")  # found by schemathesis: a 500 before


def test_every_door_that_reads_yaml_uses_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs(7))
    assert cli.main(["convert", str(bomb)]) == 1  # grpo convert: one line, no expansion
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "YAML anchor &l0 is not accepted" in err
    assert cli.main(["train", str(bomb)]) == 1  # grpo train
    assert "YAML anchor &l0 is not accepted" in capsys.readouterr().err
    with pytest.raises(YamlRefused, match="bomb.yaml: line 1"):  # from grpo import train
        load_spec(str(bomb))
    with pytest.raises(YamlRefused, match="bomb.yaml: line 1"):  # grpo submit, before any request
        submit(GrpoClient("http://127.0.0.1:9"), bomb, follow=False)
    with pytest.raises(YamlRefused, match=r"--set beta=\*x: line 1: YAML alias"):  # grpo clone
        patch_of(["beta=*x"])
    assert patch_of(["data.split=test", "beta=0"]) == {"data": {"split": "test"}, "beta": 0}
