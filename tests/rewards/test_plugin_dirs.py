"""Reward and tool functions from plain files in a plugin folder (GRPO_PLUGIN_DIRS,
grpo/spec/plugins.py): how names are found, collisions and unknown names as clear errors,
the API's submit check, the worker's loading, and `grpo plugins add|list`. The scores of a
plugin file through the service: tests/train/test_python_api_service.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.api.checks.rewards import check_rewards
from app.api.checks.tools import check_tools
from app.api.errors import ApiError
from app.cli import main as service_cli
from app.settings import Settings, get_settings
from grpo.rewards.batch import RewardBatch
from grpo.rewards.python import load_reward_function
from grpo.rewards.scoring import Rewarder
from grpo.spec import JobSpec, PythonReward
from grpo.spec.plugins import scan
from grpo.tools.kind import ToolRunFacts
from grpo.tools.python import PYTHON_TOOL
from tests.rewards.test_scoring import EXAMPLES

REWARDS = '''
import math

from os.path import join  # imported: not a plugin function


def long_answer(completions, **kwargs):
    """TRL's signature."""
    return [float(len(c)) for c in completions]


async def async_answer(completions, **kwargs):
    return [1.0 for _ in completions]


def _helper():
    return math.pi


def double(n: int) -> int:
    """Double a number.

    Args:
        n: the number
    """
    return 2 * n


class NotAFunction:
    def method(self):
        return 0


constant = 3
'''


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def batch(completions: list[str]) -> RewardBatch:
    return RewardBatch(
        run_id="r",
        step=1,
        examples=EXAMPLES,
        prompts=[e.prompt for e in EXAMPLES],
        completions=completions,
        num_tokens=[len(c) for c in completions],
    )


def refused(rewards: list[dict[str, object]], settings: Settings) -> dict[str, str]:
    with pytest.raises(ApiError) as refusal:
        check_rewards(JobSpec(rewards=rewards), settings)
    assert refusal.value.status == 422
    [field] = refusal.value.fields
    return field


def test_a_name_is_a_public_top_level_function_of_a_py_file(tmp_path: Path) -> None:
    write(tmp_path, "mine.py", REWARDS)
    write(tmp_path, "_private.py", "def hidden(completions, **kw):\n    return []\n")
    write(tmp_path, "notes.txt", "def not_python(): ...\n")
    write(tmp_path / "sub", "nested.py", "def nested(): ...\n")
    found = scan([tmp_path, tmp_path / "missing"])
    assert sorted(found.functions) == ["async_answer", "double", "long_answer"]
    assert found.functions["long_answer"] == (tmp_path / "mine.py",)
    write(tmp_path, "broken.py", "def broken(:\n")
    assert list(scan([tmp_path]).broken) == [tmp_path / "broken.py"]


def test_the_api_accepts_a_plugin_function_and_refuses_an_unknown_name_saying_both_ways(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path)  # GRPO_PLUGIN_DIRS unset: <data_dir>/plugins
    assert settings.plugin_dir_list == [tmp_path.resolve() / "plugins"]
    write(tmp_path / "plugins", "mine.py", REWARDS)
    check_rewards(JobSpec(rewards=[{"name": "python", "function": "long_answer"}]), settings)
    field = refused([{"name": "accuracy"}, {"name": "python", "function": "nope"}], settings)
    assert field["loc"] == "rewards.1.function"
    message = field["message"]
    assert message.startswith("no reward function 'nope' is installed in entry-point group")
    assert "examples/reward-plugin" in message  # the pip-installed way
    assert "GRPO_PLUGIN_DIRS" in message and "grpo plugins add FILE.py" in message  # the file
    assert "async_answer, double, long_answer" in message and str(tmp_path) not in message


def test_several_folders_and_a_name_in_two_files_or_an_entry_point_is_an_error(
    tmp_path: Path,
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    write(one, "a.py", "def shared(completions, **kw):\n    return [0.0] * len(completions)\n")
    write(two, "b.py", "def shared(completions, **kw):\n    return [1.0] * len(completions)\n")
    write(two, "c.py", "def polite(completions, **kw):\n    return [1.0] * len(completions)\n")
    settings = Settings(data_dir=tmp_path, plugin_dirs=f"{one}{os.pathsep}{two}")
    field = refused([{"name": "python", "function": "shared"}], settings)
    assert field["loc"] == "rewards.0.function"
    assert "defined in more than one plugin file (a.py, b.py)" in field["message"]
    # `polite` is also an entry point of examples/reward-plugin
    field = refused([{"name": "python", "function": "polite"}], settings)
    assert (
        "both an entry point of group 'grpo.rewards' and defined in plugin file c.py"
        in (field["message"])
    )
    with pytest.raises(ValueError, match="more than one plugin file"):
        Rewarder([PythonReward(function="shared")], plugin_dirs=settings.plugin_dir_list)
    # an entry point nobody shadows is found as before, with plugin folders set
    check_rewards(JobSpec(rewards=[{"name": "python", "function": "contains_answer"}]), settings)


def test_the_worker_scores_with_the_file_as_trl_calls_it_and_reads_it_afresh(
    tmp_path: Path,
) -> None:
    write(tmp_path, "mine.py", REWARDS)
    entries = [PythonReward(function="long_answer"), PythonReward(function="async_answer")]
    outcome = Rewarder(entries, plugin_dirs=[tmp_path]).score(batch(["ab", "abcd"]))
    assert outcome.scores == {"long_answer": [2.0, 4.0], "async_answer": [1.0, 1.0]}
    # a changed file is what the next run (the next load) calls: no cached module
    write(tmp_path, "mine.py", REWARDS.replace("float(len(c))", "-1.0"))
    assert load_reward_function("long_answer", [tmp_path])(["ab"]) == [-1.0]
    write(tmp_path, "mine.py", "import no_such_module_here\n\ndef long_answer(): ...\n")
    with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
        load_reward_function("long_answer", [tmp_path])


def test_a_plugin_function_is_a_tool_too(tmp_path: Path) -> None:
    write(tmp_path, "mine.py", REWARDS)
    settings = Settings(data_dir=tmp_path, plugin_dirs=str(tmp_path))
    spec = JobSpec(
        model="builtin:tiny-tools",
        data={"source": "builtin:tools"},
        tools=[{"name": "python", "function": "double"}],
    )
    check_tools(spec, settings)
    [tool] = PYTHON_TOOL.prepare(spec.tools[0], ToolRunFacts(plugin_dirs=(tmp_path,))).tools
    assert tool.schema["function"]["description"] == "Double a number."
    assert tool.call({"n": 21}, None) == 42
    unknown = spec.model_copy(
        update={"tools": (spec.tools[0].model_copy(update={"function": "x"}),)}
    )
    with pytest.raises(ApiError) as refusal:
        check_tools(unknown, settings)
    [field] = refusal.value.fields
    assert field["loc"] == "tools.0.function" and "GRPO_PLUGIN_DIRS" in field["message"]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """GRPO_DATA_DIR of `grpo plugins` run in this process, GRPO_PLUGIN_DIRS unset."""
    monkeypatch.setenv("GRPO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("GRPO_PLUGIN_DIRS", raising=False)
    get_settings.cache_clear()
    yield tmp_path / "data"
    get_settings.cache_clear()


def test_plugins_add_checks_the_file_then_copies_it_where_the_service_looks(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path / "src", "mine.py", REWARDS)
    assert service_cli(["plugins", "add", str(source)]) == 0
    said = capsys.readouterr().out
    assert f"added {data_dir.resolve() / 'plugins' / 'mine.py'}" in said
    assert "long_answer, async_answer, double" in said and "no restart" in said
    assert (data_dir / "plugins" / "mine.py").read_text() == REWARDS
    assert get_settings().plugin_dir_list == [data_dir.resolve() / "plugins"]
    assert service_cli(["plugins", "list"]) == 0
    listed = capsys.readouterr().out
    assert f"long_answer  {data_dir.resolve() / 'plugins' / 'mine.py'}" in listed
    assert service_cli(["plugins", "add", str(source)]) == 0  # the same file again: replaced
    assert "replaced" in capsys.readouterr().out

    cases = {
        "syntax.py": ("def broken(:\n", "SyntaxError"),
        "empty.py": ("x = 1\n\ndef _private(): ...\n", "defines no public top-level function"),
        "imports.py": ("import no_such_module_here\n\ndef f(): ...\n", "does not import"),
        "raises.py": ("def g(): ...\n\nraise RuntimeError('boom')\n", "RuntimeError: boom"),
        "clash.py": ("def long_answer(completions, **kw): ...\n", "already defined in"),
        "entry.py": ("def polite(completions, **kw): ...\n", "entry point of group"),
        "notes.txt": ("def h(): ...\n", "a `.py` file"),
    }
    for name, (text, says) in cases.items():
        assert service_cli(["plugins", "add", str(write(tmp_path / "src", name, text))]) == 1
        assert says in capsys.readouterr().err, name
    assert sorted(p.name for p in (data_dir / "plugins").iterdir()) == ["mine.py"]

    write(data_dir / "plugins", "twice.py", "def long_answer(completions, **kw): ...\n")
    assert service_cli(["plugins", "list"]) == 1  # placed by hand: listed as a problem
    assert "problem: also defined in" in capsys.readouterr().out


def test_grpo_plugins_is_a_command_of_the_grpo_cli(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    grpo = Path(sys.executable).parent / "grpo"
    listed = subprocess.run(
        [grpo, "plugins", "list"],
        env={**env, "GRPO_PLUGIN_DIRS": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert listed.returncode == 0, listed.stderr
    assert f"plugin folders: {tmp_path.resolve()}" in listed.stdout
    assert "no plugin functions" in listed.stdout
