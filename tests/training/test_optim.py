"""The optimizer the spec builds (grpo/training/optim.py): AdamW takes torch's fused kernel where
every trainable parameter allows it, and that kernel's steps equal the per-tensor loop's."""

import pytest
import torch

from grpo.spec import JobSpec, RegexReward
from grpo.training.optim import build_optimizer, can_fuse


def adamw_spec() -> JobSpec:
    return JobSpec(
        model="builtin:tiny",
        rewards=(RegexReward(pattern=r"\d"),),
        learning_rate=1e-2,
        weight_decay=0.1,
    )


def parameters(seed: int) -> list[torch.nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(64, 16), (16,), (3, 5, 7)]
    return [torch.nn.Parameter(torch.randn(s, generator=generator)) for s in shapes]


def test_adamw_is_fused_on_floating_point_cpu_parameters():
    params = parameters(0)
    optimizer = build_optimizer(params, adamw_spec())
    assert isinstance(optimizer, torch.optim.AdamW)
    assert optimizer.defaults["fused"] is True
    frozen = torch.nn.Parameter(torch.zeros(3, dtype=torch.long), requires_grad=False)
    assert can_fuse(params) and not can_fuse([*params, frozen]) and not can_fuse([])


def test_fused_steps_equal_the_loop_steps():
    fused, loop = parameters(1), parameters(1)
    optimizers = (
        build_optimizer(fused, adamw_spec()),
        torch.optim.AdamW(loop, lr=1e-2, weight_decay=0.1, foreach=False),
    )
    generator = torch.Generator().manual_seed(2)
    for _ in range(5):
        grads = [torch.randn(p.shape, generator=generator) for p in fused]
        for side, optimizer in zip((fused, loop), optimizers, strict=True):
            for p, g in zip(side, grads, strict=True):
                p.grad = g.clone()
            optimizer.step()
    for a, b in zip(fused, loop, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    with pytest.raises(AssertionError):  # the steps moved the parameters well past 1e-6
        torch.testing.assert_close(fused[0], parameters(1)[0], rtol=0, atol=1e-6)
