"""`grpo train spec.yaml`: train in this terminal, on one process or on the ranks the spec
asks for (torch's elastic launcher, grpo/parallel/launch.py), with a progress bar on rank 0 and
Ctrl-C asking for a stop between steps. `args` come from grpo/cli/main.py's parser, with
`cache_dir` already resolved. Knows nothing of the server, the store or the GRPO math.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
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
    ranks = spec.resources.num_processes
    if ranks == 1 and args.nnodes == 1:
        return train_here(args, spec, workdir)
    problem = nodes_problem(
        ranks, nodes=args.nnodes, endpoint=args.rdzv_endpoint, has_workdir=bool(args.workdir)
    )
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    from grpo.parallel.launch import (
        ChildFailedError,
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
            nodes=args.nnodes,
            rdzv_endpoint=args.rdzv_endpoint or "localhost:0",
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
        reward_hosts=[h for h in args.reward_hosts.split(",") if h.strip()],
        token_envs=[n.strip() for n in args.reward_token_envs.split(",") if n.strip()],
        keep_stopping=keep_stopping,
    )
    return 130 if result.is_stopped else 0


def fit_here(
    spec: Any,
    workdir: Path,
    *,
    cache_dir: Path,
    resume: bool = False,
    reward_hosts: list[str] | None = None,
    token_envs: list[str] | None = None,
    reward_functions: dict[str, Any] | None = None,
    keep_stopping: bool = False,
    on_step: Any = None,
) -> Any:
    """Train in this process with a progress bar and log lines on rank 0 and Ctrl-C asking
    for a stop between steps; the FitResult. `grpo train` and the Python API (grpo/python_api.py)
    both train through it, so both show the same progress and leave the same workdir."""
    from tqdm import tqdm

    from grpo.parallel.ranks import current_ranks
    from grpo.parallel.threads import apply_threads, available_cpus
    from grpo.trainer import Trainer

    is_main = current_ranks().is_main
    threads = apply_threads(device_kind(spec.device), available_cpus())
    if is_main:
        print(f"threads: {threads.label}", file=sys.stderr)
    trainer = Trainer(
        spec,
        workdir=workdir,
        cache_dir=cache_dir,
        progress=is_main,
        log=lambda level, message: tqdm.write(f"[{level}] {message}") if is_main else None,
        reward_hosts=reward_hosts or [],
        token_envs=token_envs or [],
        reward_functions=reward_functions,
    )
    bar = tqdm(
        total=spec.max_steps, desc="grpo", unit="step", dynamic_ncols=True, disable=not is_main
    )
    with StopOnInterrupt(keep=keep_stopping) as stop, bar:

        def show(report: Any) -> None:
            bar.n = report.step
            bar.set_postfix(
                reward=f"{report.scalars['reward']:.3f}", kl=f"{report.scalars['kl']:.4f}"
            )
            if on_step is not None:
                on_step(report)

        result = trainer.fit(show, should_stop=stop.is_requested, resume=resume)
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
    from pydantic import ValidationError

    from grpo.spec import JobSpec
    from grpo.spec.hints import invalid_spec_text
    from grpo.spec.yaml_input import load_yaml

    try:
        return JobSpec.model_validate(load_yaml(path.read_text(encoding="utf-8"), source=str(path)))
    except ValidationError as exc:  # the same field list as the API's 422
        raise ValueError(invalid_spec_text(exc.errors(), JobSpec)) from None


class StopOnInterrupt:
    """First Ctrl-C: finish the step, checkpoint, stop. Second: interrupt at once (`keep`:
    every Ctrl-C only asks for the stop)."""

    def __init__(self, *, keep: bool = False) -> None:
        self.requested = False
        self.keep = keep
        self._previous: Any = None

    def __enter__(self) -> StopOnInterrupt:
        # only the main thread may set handlers (the Python API may train in another one)
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested and self.keep:
            return
        self.requested = True
        if self.keep:
            print("\nstopping after this step", file=sys.stderr)
            return
        signal.signal(signal.SIGINT, self._previous)
        print("\nstopping after this step (Ctrl-C again to abort)", file=sys.stderr)

    def is_requested(self) -> bool:
        return self.requested
