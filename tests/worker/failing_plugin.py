"""A user's reward plugin whose function raises, installed as `pip install` leaves one (its
module and a dist-info with the entry point) in a folder on the service's PYTHONPATH: what
the failure-cause tests train with. The error's message carries a token of the worker's
environment and a URL with a password, which must reach no user."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.stack import Stack, running_stack

TOKEN = "tok-7f3a9c1e5b2d4680"
"""The worker's GRPO_REWARD_TOKEN_JUDGE: a secret the plugin's message quotes."""
PASSWORD = "hunter2-grader-pw"
MODULE = "failing_rewards"
SOURCE = f"""\
import os


def fails(prompts, completions, **kwargs):
    return _grade(completions)


def _grade(completions):
    raise LookupError(
        f"no grader for {{len(completions)}} completions: token {{_token()}} refused by "
        "https://grader:{PASSWORD}@grader.example/score"
    )


def _token():
    return os.environ["GRPO_REWARD_TOKEN_JUDGE"]
"""
RAISING_LINE = SOURCE.splitlines().index("    raise LookupError(") + 1
"""The line of the module that raises."""
REWARDS = [{"name": "python", "function": "fails"}]


def install_failing_plugin(site: Path) -> Path:
    """The plugin's module in `site`, and its dist-info; the module's path."""
    module = site / f"{MODULE}.py"
    module.write_text(SOURCE)
    info = site / f"{MODULE}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: failing-rewards\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[grpo.rewards]\nfails = {MODULE}:fails\n")
    return module


@contextmanager
def failing_plugin_stack(
    folder: Path, *, database_url: str | None = None, broker_url: str | None = None
) -> Iterator[tuple[Stack, Path]]:
    """The service (the embedded default unless given URLs) with the plugin installed where
    its API and worker import from; the stack and the plugin module's path."""
    site = folder / "site"
    site.mkdir(parents=True)
    module = install_failing_plugin(site)
    env = {"PYTHONPATH": str(site), "GRPO_REWARD_TOKEN_JUDGE": TOKEN}
    with running_stack(
        folder / "data", database_url=database_url, broker_url=broker_url, extra_env=env
    ) as stack:
        yield stack, module
