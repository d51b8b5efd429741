"""No silent waits: building a built-in model on first use and loading a model are log lines
(the trainer's log: the run page and `grpo submit --follow` show them)."""

from pathlib import Path

import pytest

from grpo.models.loading import load_policy

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_first_use_build_and_each_load_are_said(tmp_path: Path) -> None:
    said: list[tuple[str, str]] = []
    load_policy("builtin:tiny", cache_dir=tmp_path, progress=False, log=lambda *m: said.append(m))
    (built,) = tmp_path.glob("builtin-tiny-*[!k]")  # the model's directory, not its lock
    assert said[0] == ("info", f"building builtin:tiny on first use (kept in {built})")
    assert said[1][1].startswith("built builtin:tiny in ") and said[1][1].endswith(" s")
    assert said[2] == ("info", f"loading model builtin:tiny from {built}")
    assert len(said) == 3

    said.clear()  # built already: only the loading
    load_policy("builtin:tiny", cache_dir=tmp_path, progress=False, log=lambda *m: said.append(m))
    assert said == [("info", f"loading model builtin:tiny from {built}")]
