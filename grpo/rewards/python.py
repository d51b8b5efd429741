"""`python` rewards: functions that packages installed on the worker register under the
entry-point group `grpo.rewards`, or that files in a plugin folder define (GRPO_PLUGIN_DIRS,
grpo/spec/plugins.py), called with TRL's reward-function signature.

Only installed entry points and files an operator placed in a plugin folder are loadable: a
spec names a function, it cannot name a module or a path, and no code that arrived over HTTP
runs. Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path

from grpo.rewards.batch import Notes, RewardBatch
from grpo.rewards.kind import Refusal, RewardKind, RunFacts, Scorer, ServerFacts
from grpo.rewards.trl_call import RewardFunction, call_async, call_sync, is_async
from grpo.spec.plugins import load_function, locate, refusal_text
from grpo.spec.rewards import ENTRY_POINT_GROUP, PythonReward

WHAT = "reward function"


def installed_reward_functions() -> list[str]:
    """Names of the entry points in group `grpo.rewards` of this environment."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def load_reward_function(name: str, plugin_dirs: Sequence[Path] = ()) -> RewardFunction:
    """The function `name`: from the plugin file defining it (imported now), or registered
    in group `grpo.rewards`; ValueError when neither has it or both do."""
    installed = installed_reward_functions()
    path = locate(
        name, what=WHAT, group=ENTRY_POINT_GROUP, installed=installed, folders=plugin_dirs
    )
    if path is not None:
        return load_function(path, name)
    function = next(iter(entry_points(group=ENTRY_POINT_GROUP, name=name))).load()
    if not callable(function):
        raise ValueError(f"entry point {name!r} of group {ENTRY_POINT_GROUP!r} is not callable")
    return function  # type: ignore[no-any-return]


def check_installed(entry: PythonReward, server: ServerFacts) -> Refusal | None:
    """The function must be available here too: the API and the workers share packages and
    plugin folders."""
    why = refusal_text(
        entry.function,
        what=WHAT,
        group=ENTRY_POINT_GROUP,
        installed=installed_reward_functions(),
        folders=server.plugin_dirs,
    )
    return None if why is None else Refusal("function", why)


def prepare_function(entry: PythonReward, run: RunFacts) -> Scorer:
    """Load the function once; each step calls it as TRL calls reward functions."""
    return function_scorer(load_reward_function(entry.function, run.plugin_dirs))


def function_scorer(function: RewardFunction) -> Scorer:
    """A scorer calling `function` as TRL does (grpo/rewards/trl_call.py): an `async def`
    one gives an async scorer, which Rewarder awaits beside the step's other async ones."""
    if is_async(function):

        async def async_scorer(batch: RewardBatch, notes: Notes) -> list[float | None]:
            return await call_async(function, batch, notes)

        return async_scorer

    def scorer(batch: RewardBatch, notes: Notes) -> list[float | None]:
        return call_sync(function, batch, notes)

    return scorer


PYTHON = RewardKind("python", check_installed, prepare_function)
