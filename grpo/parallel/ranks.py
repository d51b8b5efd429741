"""The ranks of one run on torch.distributed: which groups a rank owns, and the collectives
the step needs (sums of counts and metrics, the summed gradient, gathers to rank 0).

Whole groups are dealt to ranks as contiguous slices of the step's prompt list, so a
group never spans ranks and advantages stay group-local; rank order is group order, so
concatenating what the ranks gather gives the single-process step. Every function is the
identity when the run has one process, so the single-process path runs no collective.

Gradients are summed with one all_reduce after a rank has accumulated all of its
micro-batches (not DDP's per-backward hooks): a rank may skip groups without signal and
so run fewer backward passes than another, which DDP's bucketed all-reduce cannot
pair up. Each rank's loss is already divided by the whole step's normalizer
(loss.loss_normalizer over all-reduced counts), so the sum of the ranks' gradients is the
single-process gradient (same math as DDP with a sum instead of a mean).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor


@dataclass(frozen=True)
class Ranks:
    """This process's place among the `world_size` ranks of one run."""

    rank: int = 0
    world_size: int = 1

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the only rank that reports steps and writes checkpoints."""
        return self.rank == 0

    def groups(self, num_groups: int) -> range:
        """This rank's contiguous slice of the step's groups; the first num_groups %
        world_size ranks take one more."""
        base, extra = divmod(num_groups, self.world_size)
        start = self.rank * base + min(self.rank, extra)
        return range(start, start + base + (self.rank < extra))

    def sum(self, values: Sequence[float]) -> list[float]:
        """Elementwise sum over ranks (float64, so counts stay exact), waited for here."""
        return self.sum_later(values)()

    def max(self, values: Sequence[float]) -> list[float]:
        """Elementwise max over ranks (phase timings: the step waits for the slowest)."""
        if not self.is_distributed:
            return list(values)
        tensor = torch.tensor(list(values), dtype=torch.float64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return [float(v) for v in tensor.tolist()]

    def population_std(self, values: Tensor) -> Tensor:
        """Population std of every rank's flat `values` together (0 when all are empty):
        the two-pass formula over all-reduced sums, as scale_rewards batch needs."""
        local = values.detach().double()
        count, total = self.sum([float(local.numel()), float(local.sum())])
        if count == 0:
            return values.new_zeros(())
        (squares,) = self.sum([float((local - total / count).square().sum())])
        return torch.tensor((squares / count) ** 0.5, dtype=values.dtype)

    def sum_later(self, values: Sequence[float]) -> Callable[[], list[float]]:
        """sum(values), started now and read by calling the result: the all_reduce runs in
        the background while this rank works on, so a rank that gets here before the others
        does not wait for them here but where it reads the sum (if they are still behind).
        Every rank must start its collectives in the same order, read or not."""
        if not self.is_distributed:
            copy = list(values)
            return lambda: copy
        tensor = torch.tensor(list(values), dtype=torch.float64)
        work = dist.all_reduce(tensor, async_op=True)

        def result() -> list[float]:
            work.wait()
            return [float(v) for v in tensor.tolist()]

        return result

    def sum_by_key(
        self, values: dict[str, float], *, keys: Sequence[str]
    ) -> Callable[[], dict[str, float]]:
        """Per-key sum over ranks of dicts whose keys may differ (a rank without rows), every
        key one of `keys`: one all_reduce of the values and of which rank has each key,
        started now and read by calling the result (as sum_later)."""
        unknown = sorted(set(values) - set(keys))
        if unknown:
            raise ValueError(f"sum_by_key: {unknown} not among the keys {list(keys)}")
        present = [float(key in values) for key in keys]
        sums = self.sum_later([values.get(key, 0.0) for key in keys] + present)
        n = len(keys)

        def result() -> dict[str, float]:
            total = sums()
            return {key: total[i] for i, key in enumerate(keys) if total[n + i] > 0}

        return result

    def gather_all(self, value: Any) -> list[Any]:
        """Every rank's `value` (picklable), in rank order, on every rank."""
        if not self.is_distributed:
            return [value]
        parts: list[Any] = [None] * self.world_size
        dist.all_gather_object(parts, value)
        return parts

    def gather_to_main(self, value: Any) -> list[Any] | None:
        """Every rank's `value` (picklable), in rank order, on rank 0; None on the others
        (half the traffic of gather_all, and no rank unpickles what it does not use)."""
        if not self.is_distributed:
            return [value]
        parts: list[Any] | None = [None] * self.world_size if self.is_main else None
        dist.gather_object(value, parts, dst=0)
        return parts

    def sum_gradients(self, parameters: Iterable[Tensor]) -> None:
        """Replace each trainable parameter's .grad by its sum over ranks (a rank that
        trained no row contributes zeros), as one flat all_reduce."""
        if not self.is_distributed:
            return
        params = [p for p in parameters if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        grads = [p.grad for p in params if p.grad is not None]
        flat = torch.cat([g.flatten() for g in grads])
        dist.all_reduce(flat)
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()


SINGLE = Ranks()


def current_ranks() -> Ranks:
    """The ranks of the initialised default process group, or SINGLE without one."""
    if dist.is_available() and dist.is_initialized():
        return Ranks(dist.get_rank(), dist.get_world_size())
    return SINGLE
