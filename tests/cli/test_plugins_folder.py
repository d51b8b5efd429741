"""`grpo plugins add|list` say which setting chose the plugin folder, and warn when it is a
data directory no service has used: run from another directory than `make up` (GRPO_DATA_DIR
unset, so ./data of the current directory), the command copied the file where no service
reads and said "runs started from now on can name these functions" (issue 44's newcomer)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import main as service_cli
from app.settings import get_settings

REWARD = "def short_text(completions, **kwargs):\n    return [1.0 for _ in completions]\n"


@pytest.fixture
def no_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No GRPO_DATA_DIR, GRPO_PLUGIN_DIRS or GRPO_DATABASE_URL; the current directory a
    fresh one (a project folder beside the clone, as a newcomer's)."""
    for name in ("GRPO_DATA_DIR", "GRPO_PLUGIN_DIRS", "GRPO_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "short.py").write_text(REWARD)
    get_settings.cache_clear()
    yield work
    get_settings.cache_clear()


def add(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    assert service_cli(["plugins", "add", "short.py"]) == 0
    said = capsys.readouterr()
    return said.out, said.err


def test_the_default_folder_of_an_unused_directory_is_named_and_warned_of(
    no_settings: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, err = add(capsys)
    assert f"added {no_settings / 'data' / 'plugins' / 'short.py'}" in out
    assert "the plugin folder: ./data/plugins of this directory" in out
    assert "GRPO_DATA_DIR and GRPO_PLUGIN_DIRS are unset" in out
    assert err.startswith(f"warning: {no_settings / 'data'} holds no service's data")
    assert "GRPO_DATA_DIR or GRPO_PLUGIN_DIRS the service was started with" in err
    assert service_cli(["plugins", "list"]) == 0
    listed = capsys.readouterr()
    assert "(./data/plugins of this directory" in listed.out
    assert listed.err.startswith(f"warning: {no_settings / 'data'} holds no service's data")


def test_a_data_directory_a_service_used_is_named_without_a_warning(
    no_settings: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = no_settings.parent / "service-data"
    data.mkdir()
    (data / "runs").mkdir()  # what a service with this GRPO_DATA_DIR leaves (or grpo.db)
    monkeypatch.setenv("GRPO_DATA_DIR", str(data))
    get_settings.cache_clear()
    out, err = add(capsys)
    assert f"added {data / 'plugins' / 'short.py'}" in out
    assert f"the plugin folder: GRPO_DATA_DIR/plugins, GRPO_DATA_DIR={data}" in out
    assert err == ""


def test_grpo_plugin_dirs_is_named_and_never_warned_of(
    no_settings: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = no_settings.parent / "plugins"
    monkeypatch.setenv("GRPO_PLUGIN_DIRS", str(folder))
    get_settings.cache_clear()
    out, err = add(capsys)
    assert f"added {folder / 'short.py'}" in out
    assert "the plugin folder: GRPO_PLUGIN_DIRS" in out
    assert err == ""
