"""The two weight-push paths of server mode (grpo/engines/vllm_push.py) without a vLLM server:
the server's /collective_rpc is played by a function that calls what vLLM's worker would
(`reload_weights`, or the gloo receiver's methods on a WeightReceiver whose model runner
records what it was given). Both hand over every weight bit for bit, a tied one under both
of its names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import Tensor

from grpo.cli import vllm_serve
from grpo.engines.vllm_push import GlooPush, is_this_machine, push_file
from grpo.engines.vllm_receiver import RECEIVER, WeightReceiver, address_towards


def tied_weights() -> list[tuple[str, Tensor]]:
    embed = torch.randn(5, 3)
    return [
        ("model.embed_tokens.weight", embed),
        ("model.norm.weight", torch.randn(3, dtype=torch.bfloat16)),
        ("lm_head.weight", embed),  # the same tensor: tied embeddings
    ]


def test_the_file_push_hands_every_weight_and_leaves_no_file(tmp_path: Path) -> None:
    calls: list[tuple[str, dict[str, str]]] = []
    loaded: dict[str, Tensor] = {}

    def rpc(method: str, kwargs: dict[str, str]) -> None:
        calls.append((method, kwargs))
        loaded.update(load_file(str(Path(kwargs["weights_path"]) / "model.safetensors")))

    weights = tied_weights()
    push_file(rpc, weights, tmp_path)
    assert calls == [("reload_weights", {"weights_path": str(tmp_path)})]
    assert set(loaded) == {name for name, _ in weights}
    for name, value in weights:
        assert torch.equal(loaded[name], value) and loaded[name].dtype == value.dtype
    assert list(tmp_path.iterdir()) == []  # a copy of the model in RAM: removed at once


class Runner:
    def __init__(self) -> None:
        self.weights: dict[str, Tensor] = {}

    def reload_weights(self, weights_iterator: Any) -> None:
        self.weights = {name: value.clone() for name, value in weights_iterator}


def test_the_gloo_push_hands_every_weight_to_the_workers_receiver() -> None:
    worker = WeightReceiver()
    worker.model_runner = Runner()  # type: ignore[attr-defined]  # vLLM's worker has one

    def rpc(method: str, kwargs: dict[str, str]) -> None:
        getattr(worker, method)(**kwargs)

    push = GlooPush(rpc, "127.0.0.1", 20.0)
    for _ in range(2):  # the group serves every push
        weights = tied_weights()
        push.push(weights)
        received = worker.model_runner.weights  # type: ignore[attr-defined]
        assert list(received) == [name for name, _ in weights]
        for name, value in weights:
            assert torch.equal(received[name], value) and received[name].dtype == value.dtype


def test_only_loopback_and_this_machines_own_addresses_are_this_machine() -> None:
    """The push path's choice by address (a file here, the network elsewhere); a host's own
    non-loopback address against another host's: tests/engines/test_generation_hosts.py."""
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]", "0.0.0.0"):
        assert is_this_machine(host), host
    own = address_towards("127.0.0.1")
    assert own == "127.0.0.1" and is_this_machine(own)
    for host in ("192.0.2.77", "2001:db8::7", "no-such-host.invalid"):  # documentation nets
        assert not is_this_machine(host), host


def test_grpo_vllm_serve_adds_the_receiver_this_module_defines() -> None:
    """A server on another machine takes weights only through it (its name is written out in
    grpo/cli, which must not load torch)."""
    assert RECEIVER == f"{WeightReceiver.__module__}.{WeightReceiver.__name__}"
    assert vllm_serve.RECEIVER == RECEIVER
