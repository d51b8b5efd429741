"""bench/scaling.py's turn-taking: runs that share the machine take one step at a time each,
every process of a run at once, so the host's noise falls on all of them alike."""

from __future__ import annotations

import socket
import threading
import time
from types import ModuleType

from tests.bench_module import load_bench


def scaling() -> ModuleType:
    return load_bench("scaling")


STEPS = 4


def test_runs_take_turns_one_step_at_a_time_and_each_run_all_its_processes_at_once() -> None:
    bench = scaling()
    steps: list[tuple[str, float, float]] = []  # (run, start, end) of each process's step
    lock = threading.Lock()

    together = threading.Barrier(2, timeout=30)  # the pair's two processes, in each step

    def process(side: str, port: int) -> None:
        """A run's process as fit drives it: should_stop before each step, none after the
        last, then the end of the run. The pair's processes each wait in every step for the
        other's: a turn given to one of them at a time breaks the barrier."""
        turn = bench.Turn(port, side)
        for _ in range(STEPS):
            turn.wait()
            start = time.perf_counter()
            if side == "pair":
                together.wait()
            time.sleep(0.01 * (1 + (side == "slow")))
            with lock:
                steps.append((side, start, time.perf_counter()))
        turn.close()

    members = {"fast": 1, "slow": 1, "pair": 2}
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        server.settimeout(30)  # a turn that never comes fails the test instead of hanging it
        threads = [
            threading.Thread(target=process, args=(side, port))
            for side, count in members.items()
            for _ in range(count)
        ]
        for thread in threads:
            thread.start()
        runs = bench.take_turns(server, members)
        for thread in threads:
            thread.join(timeout=10)

    assert sorted(side for side, _, _ in steps) == sorted(
        [side for side, count in members.items() for _ in range(count * STEPS)]
    )
    for side, start, end in steps:  # no other run's step overlaps this one
        assert all(other == side or end <= s or e <= start for other, s, e in steps), (
            f"a {side} step overlapped another run's"
        )
    pair = sorted((s, e) for side, s, e in steps if side == "pair")
    assert all(b[0] < a[1] for a, b in zip(pair[::2], pair[1::2], strict=True))  # together
    # every turn but the last (it holds the end of the run) is timed, around its step
    assert all(len(run.walls) == STEPS - 1 for run in runs.values())
    assert min(runs["slow"].walls) >= 0.02 and min(runs["fast"].walls) >= 0.01


def test_blocks_are_consecutive_and_equal_sized_dropping_the_rest() -> None:
    blocks = scaling().blocks
    assert blocks([1.0, 2.0, 3.0, 4.0, 5.0], 2) == [[1.0, 2.0], [3.0, 4.0]]
    assert blocks([1.0, 2.0], 8) == [[1.0], [2.0]]
