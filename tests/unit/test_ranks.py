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

LATE = 1.0
"""Seconds rank 1 sleeps before it starts its sums."""


def _rank_main(rank: int, port: int, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        ranks = Ranks(rank, 2)
        if rank == 1:
            time.sleep(LATE)
        began = time.perf_counter()
        counts = ranks.sum_later([1.0, 10.0 * (rank + 1)])
        metrics = ranks.sum_by_key(
            {"kl": 0.5, **({"loss": 2.0} if rank else {})}, keys=("loss", "kl", "x")
        )
        started = time.perf_counter() - began
        result = {"counts": counts(), "metrics": metrics(), "started": started}
        result["read"] = time.perf_counter() - began
        (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def test_a_rank_ahead_does_not_wait_where_it_starts_a_sum_only_where_it_reads_it(tmp_path):
    mp.spawn(_rank_main, args=(free_port(), str(tmp_path)), nprocs=2)
    early, late = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2))
    for result in (early, late):
        assert result["counts"] == [2.0, 30.0]
        assert result["metrics"] == {"loss": 2.0, "kl": 1.0}  # "x": on no rank
    assert early["started"] < LATE / 4  # a blocking all_reduce would wait for rank 1 here
    assert early["read"] > LATE / 2  # and here it does
    assert late["read"] < LATE / 4


def test_one_process_sums_are_its_own_values():
    ranks = Ranks()
    assert ranks.sum_later([1.5, 2.0])() == [1.5, 2.0]
    assert ranks.sum_by_key({"kl": 0.25}, keys=("loss", "kl"))() == {"kl": 0.25}
