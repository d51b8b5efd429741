"""`python` rewards: functions that packages installed on the worker register under the
entry-point group `grpo.rewards`, called with TRL's reward-function signature.

Only installed entry points are loadable: a spec names one, it cannot name a module or a
path, and no code that arrived over HTTP runs. Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from grpo.rewards.batch import Notes, RewardBatch
from grpo.rewards.kind import Refusal, RewardKind, RunFacts, Scorer, ServerFacts
from grpo.rewards.trl_call import RewardFunction, call_async, call_sync, is_async
from grpo.spec.rewards import ENTRY_POINT_GROUP, PythonReward


def installed_reward_functions() -> list[str]:
    """Names of the entry points in group `grpo.rewards` of this environment."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def load_reward_function(name: str) -> RewardFunction:
    """The function registered as `name` in group `grpo.rewards`; ValueError when absent."""
    found = entry_points(group=ENTRY_POINT_GROUP, name=name)
    if not found:
        installed = ", ".join(installed_reward_functions()) or "none"
        raise ValueError(
            f"no reward function {name!r} is installed in entry-point group "
            f"{ENTRY_POINT_GROUP!r} on this worker (installed: {installed})"
        )
    function = next(iter(found)).load()
    if not callable(function):
        raise ValueError(f"entry point {name!r} of group {ENTRY_POINT_GROUP!r} is not callable")
    return function  # type: ignore[no-any-return]


def check_installed(entry: PythonReward, server: ServerFacts) -> Refusal | None:
    """The function must be installed here too: the API and the workers share packages."""
    installed = installed_reward_functions()
    if entry.function in installed:
        return None
    return Refusal(
        "function",
        f"no reward function {entry.function!r} is installed in entry-point group "
        f"{ENTRY_POINT_GROUP!r} (installed: {', '.join(installed) or 'none'})",
    )


def prepare_function(entry: PythonReward, run: RunFacts) -> Scorer:
    """Load the function once; each step calls it as TRL calls reward functions."""
    return function_scorer(load_reward_function(entry.function))


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
