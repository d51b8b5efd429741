"""Training from Python, as TRL users work in notebooks and scripts:

    from grpo import train
    train("spec.yaml", reward_funcs=[lambda completions, **kw: [len(c) / 100 for c in completions]])

`train` (or `Trainer(spec, reward_funcs=...).train()`) trains in this process, with the
same progress bar, log lines and workdir layout as `grpo train` (grpo/cli/train.py's
fit_here). A spec is a JobSpec, a dict or a YAML/JSON path. `reward_funcs` are plain
callables with TRL's reward-function signature (grpo/rewards/trl_call.py): a `python` entry
of the spec naming a function's `__name__` calls it; a function no entry names is added as
one (label = its name; lambdas `reward_<i>`). `submit(spec, url=...)` sends a spec to a
server instead (grpo/client.py), whose workers call installed entry points and plugin-folder
files only. Torch loads when training starts, not at import. Knows nothing of the server's
code: it speaks HTTP.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grpo.report import StepReport
from grpo.run import local
from grpo.run.sink import Sink
from grpo.spec import JobSpec
from grpo.spec.yaml_input import load_yaml

SpecLike = JobSpec | dict[str, Any] | str | os.PathLike[str]
RewardFunc = Callable[..., Any]
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


def load_spec(spec: SpecLike) -> JobSpec:
    """A JobSpec from a JobSpec, a dict or the path of a YAML (or JSON) file."""
    if isinstance(spec, JobSpec):
        return spec
    if isinstance(spec, dict):
        return JobSpec.model_validate(spec)
    return JobSpec.model_validate(
        load_yaml(Path(spec).read_text(encoding="utf-8"), source=os.fspath(spec))
    )


def function_names(reward_funcs: Sequence[RewardFunc]) -> dict[str, RewardFunc]:
    """Each callable by the name a `python` entry calls it by: its `__name__`, or
    `reward_<i>` for a lambda or a name an entry cannot hold."""
    named: dict[str, RewardFunc] = {}
    for i, function in enumerate(reward_funcs):
        if not callable(function):
            raise TypeError(f"reward_funcs[{i}] is {type(function).__name__}, not a callable")
        name = getattr(function, "__name__", "")
        if not _NAME.fullmatch(name) or name in named:
            name = f"reward_{i}"
        named[name] = function
    return named


def with_functions(spec: JobSpec, functions: dict[str, RewardFunc]) -> JobSpec:
    """The spec with a `python` entry for each function none of its entries names."""
    named = {r.function for r in spec.rewards if r.name == "python"}
    added = [{"name": "python", "function": n, "label": n} for n in functions if n not in named]
    if not added:
        return spec
    body = spec.model_dump(mode="json")
    body["rewards"] = [*body["rewards"], *added]
    return JobSpec.model_validate(body)


class KeptReports(Sink):
    """Every StepReport of a run, kept in `reports` (a sink of the run: grpo/run/sink.py)."""

    def __init__(self, reports: list[StepReport]) -> None:
        self.reports = reports

    def log_step(self, report: StepReport) -> None:
        self.reports.append(report)


class Trainer:
    """A run of `spec` in this process, its python rewards calling `reward_funcs`; its
    `logging.report_to` trackers, plugin folders (GRPO_PLUGIN_DIRS) and terminal as those of
    `grpo train` (grpo/run/run.py wires both)."""

    def __init__(
        self,
        spec: SpecLike,
        *,
        reward_funcs: Sequence[RewardFunc] = (),
        workdir: str | os.PathLike[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        reward_hosts: Sequence[str] = (),
    ) -> None:
        """`workdir`: default runs/<spec name>, as `grpo train`; `cache_dir`: built-in
        models (default GRPO_CACHE_DIR or ~/.cache/grpo); `reward_hosts`: what `http`
        rewards may call."""
        self.functions = function_names(reward_funcs)
        self.spec = with_functions(load_spec(spec), self.functions)
        resources = self.spec.resources
        if self.functions and resources.num_processes * resources.num_nodes > 1:
            raise ValueError(
                "reward_funcs train in this process only: resources.num_processes must be 1 "
                "and num_nodes 1 "
                "(package the functions as a plugin for runs on several ranks)"
            )
        self.workdir = Path(workdir) if workdir else Path("runs") / (self.spec.name or "run")
        self.cache_dir = local.cache_dir(cache_dir)
        self.reward_hosts = list(reward_hosts)
        self.reports: list[StepReport] = []
        """Every StepReport of `train`, in order (rewards, metrics, groups)."""

    def train(self, *, resume: bool = False) -> Any:
        """Train to max_steps (Ctrl-C: stop after the step, checkpointed); the FitResult."""
        from grpo.cli.train import RewardReach, fit_here

        return fit_here(
            self.spec,
            self.workdir,
            cache_dir=self.cache_dir,
            resume=resume,
            rewards=RewardReach(hosts=tuple(self.reward_hosts), functions=self.functions),
            sinks=[KeptReports(self.reports)],
        )


def train(
    spec: SpecLike, *, reward_funcs: Sequence[RewardFunc] = (), resume: bool = False, **options: Any
) -> Trainer:
    """Train `spec` here with `reward_funcs` (Trainer's options: workdir, cache_dir,
    reward_hosts); the Trainer, with its `reports`."""
    trainer = Trainer(spec, reward_funcs=reward_funcs, **options)
    trainer.train(resume=resume)
    return trainer


def submit(
    spec: SpecLike, *, url: str, token: str | None = None, timeout: float = 30.0
) -> dict[str, Any]:
    """Submit `spec` to the service at `url` (POST /api/runs, through grpo/client.py); the
    run as the API returns it. Its python rewards must be installed on the workers or in
    their plugin folder. ApiClientError (a RuntimeError) names what the API refused."""
    from grpo.client import GrpoClient

    body = load_spec(spec).model_dump(mode="json")
    client = GrpoClient(url, token=token, timeout=timeout)
    try:
        return dict(client.submit(body))
    finally:
        client.http.close()
