"""The `grpo` command: `train` (grpo/cli/train.py) and `eval` run the library in the
terminal, with no server; `convert` turns a TRL GRPOConfig into a spec (grpo/cli/convert.py).

Service commands (up, worker, submit, runs, cancel, logs, doctor, export, migrate) are
handed to app.cli or worker.cli in a fresh process, so this module never imports the server
or the worker. The GRPO_* variables it reads are grpo/run/local.py's.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from grpo.cli.commands import COMMANDS, SERVICE_COMMANDS
from grpo.cli.convert import add_arguments as add_convert_arguments
from grpo.cli.convert import run_convert
from grpo.cli.vllm_serve import add_arguments as add_vllm_serve_arguments
from grpo.parallel.threads import prefer_passive_wait
from grpo.run import local


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    prefer_passive_wait()  # before torch loads here, and for the worker this process becomes
    if argv and argv[0] in SERVICE_COMMANDS:
        delegate(argv)
    args = build_parser().parse_args(argv)
    from grpo.failures import user_message

    try:
        if args.command == "convert":
            return run_convert(args)
        args.cache_dir = cache_dir(args.cache_dir)
        if args.command == "vllm-serve":
            from grpo.cli.vllm_serve import run_vllm_serve

            return run_vllm_serve(args)
        if args.command == "train":
            from grpo.cli.train import train

            return train(args)
        return evaluate(args)
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
        description="GRPO training and evaluation in this terminal, and the service's "
        "commands. `grpo COMMAND --help` for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parsers = {c.name: sub.add_parser(c.name, help=c.summary) for c in COMMANDS}
    add_train_arguments(parsers["train"])
    add_eval_arguments(parsers["eval"])
    add_convert_arguments(parsers["convert"])
    add_vllm_serve_arguments(parsers["vllm-serve"])
    return parser


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", type=Path, help="JobSpec as YAML (or JSON)")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="checkpoints go to WORKDIR/checkpoints (default runs/<spec name>)",
    )
    parser.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    parser.add_argument(
        "--nnodes",
        type=int,
        default=1,
        help="machines the run spans, each running this same command with the same spec and "
        "--workdir on shared storage: the spec's resources.num_nodes where it is more than 1 "
        "(num_processes ranks on each), else num_processes ranks in all split over them "
        "(default 1)",
    )
    parser.add_argument(
        "--rdzv-endpoint",
        default=None,
        help="host:port every node reaches for the rendezvous (one of the nodes; needed with "
        "--nnodes > 1), as torchrun's",
    )
    parser.add_argument(
        "--reward-hosts",
        default="",
        help="comma-separated host[:port]s that http rewards may call (default: none)",
    )
    parser.add_argument(
        "--reward-token-envs",
        default="",
        help="comma-separated environment variables an http reward's token_env may name, "
        "besides GRPO_REWARD_TOKEN_* (default: none); never other GRPO_* variables",
    )
    add_cache_dir_argument(parser)


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        required=True,
        help="builtin:tiny-arith, a hub id, a model dir or a checkpoint dir",
    )
    parser.add_argument("--n", type=int, default=200, help="examples to evaluate (default 200)")
    parser.add_argument(
        "--data", default="builtin:arith", help="task source (default builtin:arith)"
    )
    parser.add_argument("--split", default="test")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--device", default="auto")
    add_cache_dir_argument(parser)


def add_cache_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="built-in models cache (default GRPO_CACHE_DIR or ~/.cache/grpo)",
    )


def cache_dir(arg: Path | None) -> Path:
    return local.cache_dir(arg)


def evaluate(args: argparse.Namespace) -> int:
    from grpo.data.loading import load_examples
    from grpo.eval.greedy import greedy_accuracy
    from grpo.models.loading import pick_device
    from grpo.spec.data import DataSpec

    data = DataSpec(source=args.data, split=args.split)
    examples = load_examples(data, split=args.split)[: args.n]
    model, tokenizer = load_model(args.model, cache=args.cache_dir, device=pick_device(args.device))
    accuracy = greedy_accuracy(model, tokenizer, examples, data, max_new_tokens=args.max_new_tokens)
    where = f"{len(examples)} {args.data} {args.split} examples"
    print(f"{args.model}: greedy accuracy {accuracy:.3f} on {where}")
    return 0


def load_model(name: str, *, cache: Path, device: Any) -> tuple[Any, Any]:
    """A model by name or directory; a checkpoint dir's model/, LoRA adapters on their base."""
    import json

    from grpo.models.loading import load_policy

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


if __name__ == "__main__":
    sys.exit(main())
