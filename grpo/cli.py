"""The `grpo` command: `train` and `eval` run the library in the terminal, with no server.

Service commands (up, worker, submit, runs, cancel, logs, export, migrate) are handed to app.cli
or worker.cli in a fresh process, so this module never imports the server or the worker.
The only environment variable read in grpo/ is GRPO_CACHE_DIR, here.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

SERVICE_COMMANDS = {
    "up": "app.cli",
    "submit": "app.cli",
    "runs": "app.cli",
    "cancel": "app.cli",
    "logs": "app.cli",
    "export": "app.cli",
    "migrate": "app.cli",
    "worker": "worker.cli",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SERVICE_COMMANDS:
        delegate(argv)
    args = build_parser().parse_args(argv)
    from grpo.failures import user_message

    try:
        return train(args) if args.command == "train" else evaluate(args)
    except Exception as exc:  # noqa: BLE001 - one line, as the worker words a failed run
        print(f"error: {user_message(exc)}", file=sys.stderr)
        return 1


def delegate(argv: list[str]) -> None:
    """Replace this process with `python -m app.cli ...` or `python -m worker.cli ...`."""
    module = SERVICE_COMMANDS[argv[0]]
    rest = argv[1:] if module == "worker.cli" else argv  # worker.cli has no subcommands
    os.execvp(sys.executable, [sys.executable, "-m", module, *rest])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grpo",
        description="GRPO training and evaluation. "
        f"Service commands: {', '.join(sorted(SERVICE_COMMANDS))}.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train_parser = sub.add_parser("train", help="train from a spec YAML in this terminal")
    train_parser.add_argument("spec", type=Path, help="JobSpec as YAML (or JSON)")
    train_parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="checkpoints go to WORKDIR/checkpoints (default runs/<spec name>)",
    )
    train_parser.add_argument(
        "--resume", action="store_true", help="continue from the latest checkpoint"
    )
    train_parser.add_argument(
        "--nnodes",
        type=int,
        default=1,
        help="machines the run spans, each running this same command with the same spec and "
        "--workdir on shared storage; resources.num_processes ranks in all (default 1)",
    )
    train_parser.add_argument(
        "--rdzv-endpoint",
        default=None,
        help="host:port every node reaches for the rendezvous (one of the nodes; needed with "
        "--nnodes > 1), as torchrun's",
    )
    train_parser.add_argument(
        "--reward-hosts",
        default="",
        help="comma-separated host[:port]s that http rewards may call (default: none)",
    )
    eval_parser = sub.add_parser("eval", help="greedy accuracy on a task's test split")
    eval_parser.add_argument(
        "--model",
        required=True,
        help="builtin:tiny-arith, a hub id, a model dir or a checkpoint dir",
    )
    eval_parser.add_argument(
        "--n", type=int, default=200, help="examples to evaluate (default 200)"
    )
    eval_parser.add_argument(
        "--data", default="builtin:arith", help="task source (default builtin:arith)"
    )
    eval_parser.add_argument("--split", default="test")
    eval_parser.add_argument("--max-new-tokens", type=int, default=16)
    eval_parser.add_argument("--device", default="auto")
    for each in (train_parser, eval_parser):
        each.add_argument(
            "--cache-dir",
            type=Path,
            default=None,
            help="built-in models cache (default GRPO_CACHE_DIR or ~/.cache/grpo)",
        )
    return parser


def cache_dir(arg: Path | None) -> Path:
    return (arg or Path(os.environ.get("GRPO_CACHE_DIR", "~/.cache/grpo"))).expanduser()


def train(args: argparse.Namespace) -> int:
    from grpo.checkpoint import latest_checkpoint

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
    from grpo.launch import (
        ChildFailedError,
        SignalException,
        failure_message,
        keep_failure_report,
        launch_ranks,
        quiet_failure_logs,
    )

    here = ranks // args.nnodes
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
    from grpo.launch import worded_rank

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
    from tqdm import tqdm

    from grpo.distributed import current_ranks
    from grpo.trainer import Trainer

    is_main = current_ranks().is_main
    trainer = Trainer(
        spec,
        workdir=workdir,
        cache_dir=cache_dir(args.cache_dir),
        progress=is_main,
        log=lambda level, message: tqdm.write(f"[{level}] {message}") if is_main else None,
        reward_hosts=[h for h in args.reward_hosts.split(",") if h.strip()],
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

        result = trainer.fit(show, should_stop=stop.is_requested, resume=args.resume)
    state = "stopped" if result.is_stopped else "finished"
    if is_main:
        print(f"{state} at step {result.last_step}; checkpoints in {workdir / 'checkpoints'}")
    return 130 if result.is_stopped else 0


def evaluate(args: argparse.Namespace) -> int:
    from grpo.data import load_examples
    from grpo.data_spec import DataSpec
    from grpo.evaluate import greedy_accuracy
    from grpo.models import pick_device

    data = DataSpec(source=args.data, split=args.split)
    examples = load_examples(data, split=args.split)[: args.n]
    model, tokenizer = load_model(
        args.model, cache=cache_dir(args.cache_dir), device=pick_device(args.device)
    )
    accuracy = greedy_accuracy(model, tokenizer, examples, data, max_new_tokens=args.max_new_tokens)
    where = f"{len(examples)} {args.data} {args.split} examples"
    print(f"{args.model}: greedy accuracy {accuracy:.3f} on {where}")
    return 0


def load_model(name: str, *, cache: Path, device: Any) -> tuple[Any, Any]:
    """A model by name or directory; a checkpoint dir's model/, LoRA adapters on their base."""
    import json

    from grpo.models import load_policy

    path = Path(name).expanduser()
    if (path / "model").is_dir():
        path = path / "model"
    adapter_config = path / "adapter_config.json"
    if not adapter_config.is_file():
        local = str(path.resolve()) if path.exists() else name
        return load_policy(local, cache_dir=cache, device=device)
    from peft import PeftModel

    base = json.loads(adapter_config.read_text())["base_model_name_or_path"]
    model, tokenizer = load_policy(base, cache_dir=cache, device=device)
    return PeftModel.from_pretrained(model, str(path)).eval(), tokenizer


def load_spec(path: Path) -> Any:
    import yaml

    from grpo.spec import JobSpec

    return JobSpec.model_validate(yaml.safe_load(path.read_text()))


class StopOnInterrupt:
    """First Ctrl-C: finish the step, checkpoint, stop. Second: interrupt at once (`keep`:
    every Ctrl-C only asks for the stop)."""

    def __init__(self, *, keep: bool = False) -> None:
        self.requested = False
        self.keep = keep
        self._previous: Any = None

    def __enter__(self) -> StopOnInterrupt:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
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


if __name__ == "__main__":
    sys.exit(main())
