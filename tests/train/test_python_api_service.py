"""The Python API as a notebook uses it: `from grpo import train` with a lambda reward trains
in this process (grpo train's workdir layout), and the same function, packaged as a plugin
(examples/reward-plugin: trl_short), or as a plain file in the service's plugin folder,
gives the same rewards through the service."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grpo_example_rewards import trl_recipe

import grpo
from tests.fixtures.service import tiny_spec
from tests.stack import Stack
from tests.worker.test_run_lifecycle import wait_for_final


def spec_with(stack: Stack, function: str) -> dict[str, Any]:
    return tiny_spec(
        stack,
        name="notebook",
        max_steps=2,
        save_steps=0,
        rewards=[{"name": "python", "function": function, "label": "short"}],
    )


def test_a_lambda_trains_here_and_its_plugin_gives_the_same_rewards_in_the_service(
    pg_stack: Stack, tmp_path: Path
) -> None:
    # a notebook cell: the reward is a lambda, the spec a dict (reward_0: the lambda's name)
    trainer = grpo.train(
        spec_with(pg_stack, "reward_0"),
        reward_funcs=[lambda completion_ids, **kw: [1.0 / (1.0 + len(i)) for i in completion_ids]],
        workdir=tmp_path / "run",
        cache_dir=tmp_path / "cache",
    )
    assert [r.step for r in trainer.reports] == [1, 2]
    assert (tmp_path / "run" / "checkpoints").is_dir()  # grpo train's layout
    here = {
        (r.step, g.index): [(c.text, c.rewards["short"]) for c in g.completions or []]
        for r in trainer.reports
        for g in r.groups
    }
    for completions in here.values():
        for _text, reward in completions:
            assert reward is not None and 0 < reward <= 1.0

    for key, completions in service_groups(pg_stack, "trl_short", here).items():
        service = [(c["text"], c["rewards"]["short"]) for c in completions]
        assert sorted(service) == sorted(here[key])  # same samples, same rewards
        for c in completions:
            ids = [0] * c["num_tokens"]
            assert c["rewards"]["short"] == trl_recipe.short_completion_reward([ids])[0]


def service_groups(
    stack: Stack, reward: str, groups: Iterable[tuple[int, int]]
) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """Train spec_with(stack, reward) through the service; the stored completions of each
    (step, group index) in `groups`."""
    with stack.client() as client:
        response = client.post("/api/runs", json=spec_with(stack, reward))
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        run = wait_for_final(client, run_id)
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        return {
            (step, index): client.get(f"/api/runs/{run_id}/steps/{step}/groups/{index}").json()[
                "completions"
            ]
            for step, index in groups
        }


def test_submit_sends_a_spec_to_the_service(pg_stack: Stack) -> None:
    spec = spec_with(pg_stack, "trl_short")
    run = grpo.submit({**spec, "max_steps": 1}, url=pg_stack.url)
    with pg_stack.client() as client:
        assert wait_for_final(client, run["id"])["status"] == "succeeded"


PLUGIN_FILE = '''
def plugin_short(completions, **kwargs):
    """TRL's signature: shorter completions score higher."""
    return [1.0 / (1.0 + len(text)) for text in completions]
'''


def test_a_function_in_the_plugin_folder_scores_as_it_does_through_train(
    pg_stack: Stack, tmp_path: Path
) -> None:
    """The same file, given to `grpo.train` as a callable and added to the running service's
    plugin folder with `grpo plugins add` (default <data_dir>/plugins, the worker already
    running): the same rewards for the same completions, step by step."""
    source = tmp_path / "short_plugin.py"
    source.write_text(PLUGIN_FILE)
    plugin_short = runpy.run_path(str(source))["plugin_short"]
    trainer = grpo.train(
        spec_with(pg_stack, "plugin_short"),
        reward_funcs=[plugin_short],
        workdir=tmp_path / "run",
        cache_dir=tmp_path / "cache",
    )
    here = {
        (r.step, g.index): sorted((c.text, c.rewards["short"]) for c in g.completions or [])
        for r in trainer.reports
        for g in r.groups
    }
    assert sorted({step for step, _ in here}) == [1, 2]

    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    grpo_cli = Path(sys.executable).parent / "grpo"
    added = subprocess.run(
        [grpo_cli, "plugins", "add", source],
        env={**env, "GRPO_DATA_DIR": str(pg_stack.data_dir)},
        capture_output=True,
        text=True,
    )
    assert added.returncode == 0, added.stdout + added.stderr
    target = pg_stack.data_dir / "plugins" / "short_plugin.py"
    try:
        assert target.read_text() == PLUGIN_FILE and "no restart" in added.stdout
        for key, completions in service_groups(pg_stack, "plugin_short", here).items():
            service = sorted((c["text"], c["rewards"]["short"]) for c in completions)
            assert service == here[key]  # same samples, same rewards
    finally:
        target.unlink()
