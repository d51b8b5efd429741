"""`grpo train spec.yaml`: train in this terminal, on one process or on the ranks the spec
asks for (torch's elastic launcher, grpo/parallel/launch.py), with a progress bar on rank 0 and
Ctrl-C asking for a stop between steps. `args` come from grpo/cli/main.py's parser, with
`cache_dir` already resolved. Knows nothing of the server, the store or the GRPO math.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal


def train(args: argparse.Namespace) -> int:
    from grpo.checkpoints.files import latest_checkpoint

    spec = load_spec(args.spec)
    workdir = args.workdir or Path("runs") / (spec.name or args.spec.stem)
    if not args.resume and latest_checkpoint(workdir) is not None:
        print(
            f"error: {workdir} already has checkpoints; pass --resume to continue or choose "
            "another --workdir",
            file=sys.stderr,
        )
        return 2
    # a spec of num_nodes 1 is split over --nnodes machines (num_processes ranks in all);
    # one of num_nodes N > 1 runs num_processes ranks on each of N, so --nnodes must be N
    ranks = spec.resources.num_processes * spec.resources.num_nodes
    if ranks == 1 and args.nnodes == 1:
        return train_here(args, spec, workdir)
    problem = spec_nodes_problem(spec.resources.num_nodes, args.nnodes) or nodes_problem(
        ranks, nodes=args.nnodes, endpoint=args.rdzv_endpoint, has_workdir=bool(args.workdir)
    )
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from grpo.parallel.launch import (
        ChildFailedError,
        Nodes,
        SignalException,
        failure_message,
        keep_failure_report,
        launch_ranks,
        quiet_failure_logs,
    )

    here = ranks // args.nnodes
    share_threads(spec.device, ranks=here)
    where = f" here, of {ranks} on {args.nnodes} nodes" if args.nnodes > 1 else ""
    plural = "s" if here > 1 else ""
    print(f"launching {here} rank{plural}{where} (torch elastic launcher)", file=sys.stderr)
    quiet_failure_logs()  # a failure is said in one line below, its details kept in a file
    try:
        code: int = launch_ranks(
            train_rank,
            (args, spec, workdir),
            num_processes=here,
            run_id=workdir.name,
            nodes=Nodes(args.nnodes, args.rdzv_endpoint or "localhost:0"),
            log_dir=workdir / "ranks",
        )
    except ChildFailedError as exc:
        print(f"error: {failure_message(exc, num_processes=ranks)}", file=sys.stderr)
        print(f"details: {keep_failure_report(exc, workdir / 'ranks')}", file=sys.stderr)
        return 1
    except SignalException:  # Ctrl-C: the ranks stopped after their step and checkpointed
        print(f"stopped; checkpoints in {workdir / 'checkpoints'}", file=sys.stderr)
        return 130
    return code


def spec_nodes_problem(spec_nodes: int, nodes: int) -> str | None:
    """Why `--nnodes` does not match the spec's `resources.num_nodes`, or None."""
    if spec_nodes > 1 and nodes != spec_nodes:
        return (
            f"resources.num_nodes is {spec_nodes}: run this command on each of the "
            f"{spec_nodes} machines with --nnodes {spec_nodes} and the same --rdzv-endpoint "
            f"(it has --nnodes {nodes})"
        )
    return None


def nodes_problem(ranks: int, *, nodes: int, endpoint: str | None, has_workdir: bool) -> str | None:
    """Why `--nnodes`/`--rdzv-endpoint` cannot split `ranks`, or None."""
    if nodes < 1:
        return f"--nnodes is {nodes}; give 1 or more"
    if ranks % nodes:
        return (
            f"resources.num_processes is {ranks}, which {nodes} nodes cannot share equally "
            "(every node runs the same number of ranks)"
        )
    if nodes > 1 and not endpoint:
        return "--nnodes > 1 needs --rdzv-endpoint host:port, the same on every node"
    if nodes > 1 and not has_workdir:
        # the default, runs/<name>, is under each node's own working directory
        return "--nnodes > 1 needs --workdir on storage every node shares, the same on each"
    return None


def train_rank(args: argparse.Namespace, spec: Any, workdir: Path) -> int:
    """One rank of a `num_processes > 1` run, started by the launcher."""
    from grpo.parallel.launch import worded_rank

    with worded_rank(spec.device):
        # the launcher passes the Ctrl-C it gets on to the ranks, after the terminal's own:
        # every one of them only asks for the stop between steps
        code = train_here(args, spec, workdir, keep_stopping=True)
    if code == 130:
        # stopped by Ctrl-C, checkpoint written: exit now, since the launcher's wrapper
        # would wait for a "finished" event its agent, shutting down, never sets (and
        # SIGKILL this rank 30 s later)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    return code


def train_here(
    args: argparse.Namespace, spec: Any, workdir: Path, *, keep_stopping: bool = False
) -> int:
    """Train in this process (one rank of several when launched); rank 0 shows progress."""
    result = fit_here(
        spec,
        workdir,
        cache_dir=args.cache_dir,
        resume=args.resume,
        rewards=RewardReach(
            hosts=tuple(h for h in args.reward_hosts.split(",") if h.strip()),
            token_envs=tuple(n.strip() for n in args.reward_token_envs.split(",") if n.strip()),
        ),
        keep_stopping=keep_stopping,
    )
    return 130 if result.is_stopped else 0


@dataclass(frozen=True)
class RewardReach:
    """What this process's rewards may reach, as fit_here's `rewards`."""

    hosts: tuple[str, ...] = ()
    """The `host[:port]`s that `http` rewards may call."""
    token_envs: tuple[str, ...] = ()
    """Variables besides GRPO_REWARD_TOKEN_* an `http` reward's `token_env` may name."""
    functions: dict[str, Any] | None = None
    """Callables of this process for the `python` entries naming them (the Python API)."""


def fit_here(
    spec: Any,
    workdir: Path,
    *,
    cache_dir: Path,
    resume: bool = False,
    rewards: RewardReach = RewardReach(),
    keep_stopping: bool = False,
    sinks: Sequence[Any] = (),
) -> Any:
    """Train in this process with a progress bar and log lines on rank 0 and Ctrl-C asking
    for a stop between steps, as a Run (grpo/run/run.py) with this terminal and `sinks` as
    its sinks; the FitResult. `grpo train` and the Python API (grpo/python_api.py) both train
    through it, so both show the same progress and leave the same workdir; GRPO_PLUGIN_DIRS,
    GRPO_VLLM_SERVER_HOSTS and GRPO_MLFLOW_URI count as on the service's workers
    (grpo/run/local.py)."""
    from grpo.cli.terminal import TerminalSink
    from grpo.parallel.ranks import current_ranks
    from grpo.parallel.threads import apply_threads, available_cpus
    from grpo.run import local
    from grpo.run.environment import RunEnvironment, RunReach
    from grpo.run.run import Run

    is_main = current_ranks().is_main
    threads = apply_threads(device_kind(spec.device), available_cpus())
    if is_main:
        print(f"threads: {threads.label}", file=sys.stderr)
    env = RunEnvironment(
        workdir=workdir,
        cache_dir=cache_dir,
        reach=RunReach(
            reward_hosts=rewards.hosts,
            token_envs=rewards.token_envs,
            plugin_dirs=local.plugin_dirs(),
            vllm_server_hosts=local.vllm_server_hosts(),
            reward_functions=rewards.functions,
        ),
        mlflow_uri=local.mlflow_uri(),
        progress=is_main,
    )
    terminal = TerminalSink(spec.max_steps, is_main=is_main, keep_stopping=keep_stopping)
    result = Run(spec, env, [terminal, *sinks]).fit(resume=resume)
    state = "stopped" if result.is_stopped else "finished"
    if is_main:
        print(f"{state} at step {result.last_step}; checkpoints in {workdir / 'checkpoints'}")
    return result


def device_kind(device: str) -> Literal["cuda", "cpu"]:
    """Where this process's run trains, for its thread count: its spec's device here."""
    import torch

    if device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()):
        return "cuda"
    return "cpu"


def share_threads(device: str, *, ranks: int) -> None:
    """The ranks launched here share this machine's CPUs: each gets its share through
    OMP_NUM_THREADS, which they read when torch loads (unless the user set it)."""
    from grpo.parallel.threads import available_cpus, threads_for, user_threads

    if user_threads() is None:
        count = threads_for(device_kind(device), available_cpus(), ranks=ranks)
        os.environ["OMP_NUM_THREADS"] = str(count)


def load_spec(path: Path) -> Any:
    """The spec at `path`, or ValueError with every problem: the field list of the API's
    422, then each `python` reward or tool naming a function this host has neither installed
    nor in its plugin folders, as the API's submit check says it. Both before anything loads:
    a misspelt function name was found only after the model was built (minutes on a
    built-in's first use), and not beside the spec's other problems."""
    from pydantic import ValidationError

    from grpo.spec import JobSpec
    from grpo.spec.hints import invalid_spec_text
    from grpo.spec.yaml_input import load_yaml

    raw = load_yaml(path.read_text(encoding="utf-8"), source=str(path))
    missing = [f"  {loc}: {why}" for loc, why in function_problems(raw)]
    try:
        spec = JobSpec.model_validate(raw)
    except ValidationError as exc:  # the same field list as the API's 422
        raise ValueError("\n".join([invalid_spec_text(exc.errors(), JobSpec), *missing])) from None
    if missing:
        raise ValueError("\n".join(["invalid job spec:", *missing]))
    return spec


def function_problems(raw: object) -> list[tuple[str, str]]:
    """(loc, why) for each `python` entry of `rewards`, `eval.rewards` and `tools` whose
    function is unknown here or ambiguous, read from the spec as written (so they are found
    beside its other problems). The folders are those the run would read
    (grpo/run/local.py)."""
    from importlib.metadata import entry_points

    from grpo.run.local import plugin_dirs
    from grpo.spec.plugins import refusal_text
    from grpo.spec.rewards import ENTRY_POINT_GROUP
    from grpo.spec.tools import TOOL_GROUP

    if not isinstance(raw, dict):
        return []
    given_eval = raw.get("eval")
    sections = [
        ("rewards", raw.get("rewards"), "reward function", ENTRY_POINT_GROUP),
        (
            "eval.rewards",
            given_eval.get("rewards") if isinstance(given_eval, dict) else None,
            "reward function",
            ENTRY_POINT_GROUP,
        ),
        ("tools", raw.get("tools"), "tool", TOOL_GROUP),
    ]
    found = []
    for prefix, entries, what, group in sections:
        if not isinstance(entries, list):
            continue
        installed = sorted({ep.name for ep in entry_points(group=group)})
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or entry.get("name") != "python":
                continue
            function = entry.get("function")
            if not isinstance(function, str):
                continue
            why = refusal_text(
                function, what=what, group=group, installed=installed, folders=plugin_dirs()
            )
            if why is not None:
                found.append((f"{prefix}.{i}.function", why))
    return found
