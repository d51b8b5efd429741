"""A rank of the service (started by worker/rank_entry.py, living in grpo/parallel/launch.py's
worded_rank as worker/ranks.py's do) whose collective broke because its peer was killed is
not named as the cause: it waits in worded_rank until its launcher has seen the peer's
death. Without the wait the launcher, polling every 0.5 s, often found both exits at once
and named the lower rank, the collateral one (stop 46's clean-clone runs)."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

from grpo.parallel.launch import failure_message, launch_ranks, worded_rank
from worker.rank_entry import enter


def killed_in_a_collective() -> None:
    """Rank 1 is killed by SIGKILL while rank 0 waits for it in a barrier."""
    with worded_rank("cpu") as ranks:
        dist.barrier()  # both in the group
        if ranks.rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        dist.barrier()  # rank 0: "Connection reset by peer" within milliseconds


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_the_killed_rank_is_named_not_its_peer(tmp_path: Path, start_method: str) -> None:
    loaded = multiprocessing.get_context("spawn").Event()
    target = f"{__name__}:killed_in_a_collective"
    for attempt in range(3):
        with pytest.raises(ChildFailedError) as info:
            launch_ranks(
                enter,
                (loaded, target),
                num_processes=2,
                run_id=f"killed-{attempt}",
                log_dir=tmp_path / str(attempt),
                start_method=start_method,
            )
        message = failure_message(info.value, num_processes=2)
        assert message.startswith("rank 1 of 2 (pid ") and "was killed by SIGKILL" in message
