"""`grpo convert GRPOConfig.yaml`: a TRL recipe's config as a JobSpec YAML
(grpo/spec/trl_config.py), the fields it could not map listed at its top with the reason."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpo.spec.trl_config import convert, spec_yaml
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
    parser.add_argument("-o", "--output", type=Path, default=None, help="default: stdout")


def run_convert(args: argparse.Namespace) -> int:
    config = load_yaml(args.config.read_text(encoding="utf-8"), source=str(args.config)) or {}
    if not isinstance(config, dict):
        raise ValueError(f"{args.config}: expected a mapping of GRPOConfig fields")
    text = spec_yaml(convert(config, processes=args.processes))
    if args.output is None:
        sys.stdout.write(text)
    else:
        args.output.write_text(text, encoding="utf-8")
    return 0
