"""Ranks' background sums (grpo/parallel/ranks.py sum_later, sum_by_key) on 2 gloo ranks: a
rank that starts one before the other does not wait there, only where it reads the sum,
and the sum is right, keys that only one rank has included."""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp

from grpo.parallel.ranks import Ranks
from tests.stack import free_port

HANG_S = 60
"""How long a rank waits for the other's sign before it gives up (and the test fails): the
sign comes in milliseconds unless a sum blocks where it should not."""


def _wait_for(sign: Path) -> bool:
    """Whether `sign` appeared within HANG_S: a wait for the other rank, bounded."""
    deadline = time.monotonic() + HANG_S
    while not sign.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _rank_main(rank: int, port: int, out_dir: str) -> None:
    """Rank 0 starts its sums and only then lets rank 1 start its own; rank 1 reads its sums
    before rank 0 reads: a blocking start on rank 0, or a read on rank 1 that waits for rank
    0's read, leaves the other rank waiting out HANG_S and noting that it did."""
    signs = Path(out_dir)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        ranks = Ranks(rank, 2)
        result: dict[str, object] = {}
        if rank == 1:
            result["other_started_first"] = _wait_for(signs / "rank0-started")
        counts = ranks.sum_later([1.0, 10.0 * (rank + 1)])
        metrics = ranks.sum_by_key(
            {"kl": 0.5, **({"loss": 2.0} if rank else {})}, keys=("loss", "kl", "x")
        )
        if rank == 0:
            (signs / "rank0-started").touch()
            result["other_read_first"] = _wait_for(signs / "rank1-read")
        result |= {"counts": counts(), "metrics": metrics()}
        if rank == 1:
            (signs / "rank1-read").touch()
        (signs / f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def test_a_rank_ahead_does_not_wait_where_it_starts_a_sum_only_where_it_reads_it(tmp_path):
    mp.spawn(_rank_main, args=(free_port(), str(tmp_path)), nprocs=2)
    early, late = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    for result in (early, late):  # a read that did not wait for the other rank lacks its part
        assert result["counts"] == [2.0, 30.0]
        assert result["metrics"] == {"loss": 2.0, "kl": 1.0}  # "x": on no rank
    assert late["other_started_first"]  # a blocking all_reduce would have held rank 0 there
    assert early["other_read_first"]  # rank 1's sums were done by its own start, not rank 0's read


def test_one_process_sums_are_its_own_values():
    ranks = Ranks()
    assert ranks.sum_later([1.5, 2.0])() == [1.5, 2.0]
    assert ranks.sum_by_key({"kl": 0.25}, keys=("loss", "kl"))() == {"kl": 0.25}
