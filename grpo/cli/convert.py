"""`grpo convert GRPOConfig.yaml`: a TRL recipe's config as a JobSpec YAML
(grpo/spec/trl_config.py), the fields it could not map listed at its top with the reason.
`--submit` hands the spec to `grpo submit` (app/cli.py, in a fresh process: the library never
imports the server), which uploads the recipe's local dataset first."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from grpo.spec.trl_config import Conversion, convert, spec_yaml
from grpo.spec.yaml_input import load_yaml


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`grpo convert`'s arguments (its summary is in grpo/cli/commands.py)."""
    parser.add_argument("config", type=Path, help="GRPOConfig YAML (script arguments too)")
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="devices the TRL recipe ran on (accelerate's num_processes; default 1): "
        "prompts_per_step = per_device_train_batch_size × gradient_accumulation_steps × "
        "processes / num_generations",
    )
    parser.add_argument(
        "--async",
        dest="is_async",
        action="store_const",
        const=True,
        default=None,
        help="read the config as TRL's AsyncGRPOConfig (async_generation: true on a vLLM "
        "server), also when it sets none of that class's own fields (max_staleness, "
        "weight_sync_steps, max_inflight_tasks, ...), which otherwise tell it",
    )
    parser.add_argument(
        "-o", "--output", type=Path, default=None, help="default: stdout (with --submit: none)"
    )
    parser.add_argument(
        "--submit",
        action="store_true",
        help="submit the spec to the server as `grpo submit` does: a dataset_name that is a "
        "file on this machine is uploaded as a dataset first; the fields not mapped go to "
        "stderr",
    )
    parser.add_argument(
        "--no-upload",
        dest="upload",
        action="store_false",
        help="with --submit: send the spec as it is, a local dataset path not uploaded",
    )
    parser.add_argument("--follow", "-f", action="store_true", help="with --submit: follow it")
    parser.add_argument("--url", default=None, help="with --submit: server (default GRPO_URL)")
    parser.add_argument(
        "--token", default=None, help="with --submit: bearer token (default GRPO_TOKEN)"
    )


def run_convert(args: argparse.Namespace) -> int:
    config = load_yaml(args.config.read_text(encoding="utf-8"), source=str(args.config)) or {}
    if not isinstance(config, dict):
        raise ValueError(f"{args.config}: expected a mapping of GRPOConfig fields")
    conversion = convert(config, processes=args.processes, is_async=args.is_async)
    local_dataset(config, conversion)
    text = spec_yaml(conversion)
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
    elif not args.submit:
        sys.stdout.write(text)
    if not args.submit:
        return 0
    if args.output is None:  # what was left out is still said
        sys.stderr.write("".join(f"{line}\n" for line in text.splitlines() if line[:1] == "#"))
    return submit(text, args)


def local_dataset(config: dict[str, Any], conversion: Conversion) -> None:
    """A `dataset_name` that names a file here is a local path, as TRL's `load_dataset`
    reads it, though it looks like a hub id (`data/train.jsonl`)."""
    name = config.get("dataset_name")
    data = conversion.spec.get("data")
    if (
        isinstance(name, str)
        and isinstance(data, dict)
        and data.get("source") == f"hf:{name}"
        and Path(name).expanduser().is_file()
    ):
        data["source"] = f"file:{name}"


def submit(text: str, args: argparse.Namespace) -> int:
    """`grpo submit -` with the spec on its stdin; its exit code."""
    command = [sys.executable, "-m", "app.cli", "submit", "-"]
    command += [] if args.upload else ["--no-upload"]
    command += ["--follow"] if args.follow else []
    for option in ("url", "token"):
        if getattr(args, option):
            command += [f"--{option}", getattr(args, option)]
    return subprocess.run(command, input=text, text=True, check=False).returncode
