"""What a vLLM server's worker adds to take the trainer's weights through a gloo process
group: `vllm serve --worker-extension-cls grpo.engines.vllm_receiver.WeightReceiver`
mixes this class into vLLM's worker (as TRL's own server mixes its WeightSyncWorkerExtension),
and the trainer calls its methods by name through the server's `/collective_rpc`.

It runs inside the server's worker process, where `self.model_runner` is vLLM's; the other
side is grpo/engines/vllm_push.py. Torch only: the group is a TCPStore rendezvous and a
ProcessGroupGloo of two ranks (trainer 0, worker 1), no default process group in either
process. Without this extension the server still takes weights from a file
(`reload_weights` with a `weights_path`, vLLM's own).
"""

from __future__ import annotations

import json
import socket
from datetime import timedelta
from typing import Any

import torch
from torch import Tensor

TRAINER, WORKER = 0, 1
RECEIVER = f"{__name__}.WeightReceiver"
"""What `--worker-extension-cls` names (`grpo vllm-serve` adds it)."""


def gloo_group(host: str, port: int, rank: int, timeout_s: float) -> Any:
    """A two-rank gloo group over a TCPStore on host:port (the trainer hosts the store).
    Each side's gloo device is its own address on the route to `host` (the trainer's: its
    own address, `host` itself), not the one gloo would take by default (what the machine's
    host name resolves to, or GLOO_SOCKET_IFNAME's interface), which the other machine may
    not reach."""
    timeout = timedelta(seconds=timeout_s)
    store = torch.distributed.TCPStore(  # type: ignore[attr-defined]  # public, not re-exported
        host, port, world_size=2, is_master=rank == TRAINER, timeout=timeout
    )
    gloo = torch.distributed.ProcessGroupGloo
    options = gloo._Options()  # type: ignore[attr-defined]  # in torch, not in its stubs
    options._devices = [gloo.create_device(hostname=address_towards(host))]
    options._timeout = timeout
    return gloo(store, rank, 2, options)


def address_towards(host: str) -> str:
    """This machine's address on the route to `host` (loopback for this machine's own
    loopback or unspecified address): where the kernel would send from. Sends nothing."""
    target = "127.0.0.1" if host in ("", "0.0.0.0", "localhost") else host.strip("[]")
    family, _, _, _, address = socket.getaddrinfo(target, 9, type=socket.SOCK_DGRAM)[0]
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        return str(sock.getsockname()[0])


def unpack(flat: Tensor, layout: list[tuple[str, str, list[int]]]) -> list[tuple[str, Tensor]]:
    """The named tensors packed one after the other in `flat` (bytes), as `pack` laid them."""
    out, offset = [], 0
    for name, dtype_name, shape in layout:
        dtype = getattr(torch, dtype_name)
        size = int(torch.Size(shape).numel()) * dtype.itemsize
        part = flat[offset : offset + size]
        part = part if offset % dtype.itemsize == 0 else part.clone()  # a view needs alignment
        out.append((name, part.view(dtype).view(shape)))
        offset += size
    return out


class WeightReceiver:
    """Methods vLLM's worker gains: join the trainer's group, receive one push."""

    grpo_group: Any = None

    def grpo_is_receiver(self) -> bool:
        """True: the trainer asks it first, to tell a server without this extension."""
        return True

    def grpo_join(self, host: str, port: str, timeout_s: str) -> None:
        self.grpo_group = gloo_group(host, int(port), WORKER, float(timeout_s))

    def grpo_receive(self, layout_json: str) -> None:
        """Receive the flat buffer the trainer broadcasts and load it in place."""
        layout = [(n, d, list(s)) for n, d, s in json.loads(layout_json)]
        total = sum(int(torch.Size(s).numel()) * getattr(torch, d).itemsize for _, d, s in layout)
        flat = torch.empty(total, dtype=torch.uint8)
        self.grpo_group.broadcast(flat, TRAINER).wait()
        model_runner: Any = self.model_runner  # type: ignore[attr-defined]  # vLLM's worker
        model_runner.reload_weights(weights_iterator=iter(unpack(flat, layout)))

    def grpo_leave(self) -> None:
        self.grpo_group = None
