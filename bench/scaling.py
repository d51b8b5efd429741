"""Data-parallel step time: 2 ranks (one torch thread each, gloo) against one process with
one thread, on the demo spec, and whether they sample the same completions.

    python bench/scaling.py [--spec examples/arith-demo.yaml] [--steps 40] [--ranks 2]

Four runs of the spec start at once, each spawned by torch's launcher (so all start
alike), and take turns one step at a time, so the host's slow and fast moments (on a
shared VM a process's step time wanders by 1.5x within a minute) fall on all of them
alike: `ranks` (the spec on --ranks ranks), `single` (one process), `alone` (one process
on 1/ranks of the step's prompts) and `beside` (--ranks such processes at once, no
process group). A run's turn starts when it asks whether to stop before a step (on rank 0
of `ranks`; the other ranks wait for it in the stop check) and ends when it asks again;
the others wait meanwhile, blocked on a socket, using no CPU.

Each run's step time is its steps' `time/step` after the first (warm-up; on ranks the max
over ranks, as the trainer reports it; `beside`: the max over its processes), compared
step by step: the ratio is median(ranks) / median(single), and its spread is that of the
same ratio over blocks of consecutive steps. Over the full step's time, `alone` is the
ratio the ranks would reach if they neither communicated nor shared the machine (what is
above 1/ranks is work that halving the batch does not halve), `beside` adds the sharing
of the cores (and each step waiting for the slower of two processes), and the ranks' own
ratio adds their communication. "Turn to turn" is the wall time of a whole turn: the step,
gathering it to rank 0, the report and the stop check, as a user waits for it. Before
the runs, a calibration times a pure-Python loop in one process and in --ranks at once
(core_gain): on a VM whose vCPUs share host cores, 2 processes do well under twice the
work of one, and 1/gain is a floor no data-parallel run can beat there.
samples_identical is the fraction of step 1's completions (text and reward, in step
order) equal in `single` and `ranks`. Last line:

    scaling: ranks=2 step_time_ratio=<t2/t1> samples_identical=<fraction>
"""

from __future__ import annotations

import argparse
import os
import pickle
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import yaml  # noqa: E402

from grpo.parallel.launch import init_rank, launch_ranks, leave_group  # noqa: E402
from grpo.report import StepReport  # noqa: E402
from grpo.spec import JobSpec  # noqa: E402
from grpo.training.trainer import TrainingLoop  # noqa: E402

SIDES = ("single", "ranks", "alone", "beside")
Samples = list[tuple[str, float]]


class Turn:
    """A run's side of the turn-taking: `wait` (its should_stop) says the previous step is
    done and blocks until the run may take its next one."""

    def __init__(self, port: int, side: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(side.encode() + b"\n")

    def wait(self) -> bool:
        self.sock.sendall(b"r")
        if self.sock.recv(1) != b"g":
            raise RuntimeError("scaling: the turn-taker is gone")
        return False  # never asks to stop

    def close(self) -> None:
        self.sock.sendall(b"e")
        self.sock.close()


def run_side(spec: JobSpec, side: str, port: int, out: Path, cache: Path) -> None:
    """One process of one run, spawned by the launcher: trains the spec taking turns, and
    leaves its step times (and step 1's samples) in `out`."""
    rank = int(os.environ["RANK"])
    if side == "ranks":
        init_rank(spec.device)
    torch.set_num_threads(1)
    turn = Turn(port, side) if side != "ranks" or rank == 0 else None
    reports: list[StepReport] = []
    try:
        TrainingLoop(spec, workdir=out / f"{side}-{rank}", cache_dir=cache).fit(
            reports.append,
            should_stop=turn.wait if turn else lambda: False,
            resume=False,
        )
    finally:
        if side == "ranks":
            leave_group()
        if turn is not None:
            turn.close()
    if reports:  # on rank 0 of `ranks`, on every process of the others
        first = [(c.text, c.reward) for g in reports[0].groups for c in g.completions or []]
        steps = [r.scalars["time/step"] for r in reports]
        (out / f"{side}-{rank}.pkl").write_bytes(pickle.dumps((steps, first)))


@dataclass
class Taken:
    """What the turn-taker saw of one run: each turn's wall time."""

    members: list[socket.socket] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    is_done: bool = False


def take_turns(server: socket.socket, expected: dict[str, int]) -> dict[str, Taken]:
    """Accept every run's processes, wait until all are ready (models loaded), then give
    one step at a time to each run in turn, all processes of a run at once, until every
    run has ended."""
    runs = {side: Taken() for side in expected}
    for _ in range(sum(expected.values())):
        conn, _ = server.accept()
        conn.settimeout(server.gettimeout())  # a run that hangs fails the bench
        side = _read_line(conn)
        runs[side].members.append(conn)
    for run in runs.values():
        for conn in run.members:
            _expect(conn, b"r")
    while not all(run.is_done for run in runs.values()):
        for run in runs.values():
            if run.is_done:
                continue
            start = time.perf_counter()
            for conn in run.members:
                conn.sendall(b"g")
            replies = [conn.recv(1) for conn in run.members]
            run.walls.append(time.perf_counter() - start)
            if any(r != b"r" for r in replies):
                run.is_done = True
                run.walls.pop()  # the last step and the end of the run (a checkpoint)
    return runs


def _read_line(conn: socket.socket) -> str:
    """One line, byte by byte: a buffered reader could swallow the "r" that follows it."""
    line = b""
    while not line.endswith(b"\n"):
        byte = conn.recv(1)
        if not byte:
            raise RuntimeError("scaling: a run hung up before saying which it is")
        line += byte
    return line.decode().strip()


def _expect(conn: socket.socket, what: bytes) -> None:
    got = conn.recv(1)
    if got != what:
        raise RuntimeError(f"scaling: a run sent {got!r} before its first step")


def side_main(args: argparse.Namespace) -> None:
    """A child of the bench: one run, launched as the spec (or the side) says."""
    spec = JobSpec.model_validate_json(Path(args.side_spec).read_text())
    processes = spec.resources.num_processes if args.side == "ranks" else args.side_processes
    launch_ranks(
        run_side,
        (spec, args.side, args.port, Path(args.out), Path(args.cache)),
        num_processes=processes,
        run_id=args.side,
    )


def side_specs(args: argparse.Namespace) -> dict[str, JobSpec]:
    data: dict[str, Any] = yaml.safe_load(args.spec.read_text())
    data.update(max_steps=args.steps, save_steps=0, save_final=False)
    prompts = data["prompts_per_step"]
    data["logging"] = {**data.get("logging", {}), "max_groups_per_step": prompts}
    part = prompts // args.ranks
    share = {**data, "prompts_per_step": part, "resources": {"num_processes": 1}}
    share["logging"] = {**data["logging"], "max_groups_per_step": part}
    if args.precision:
        data["precision"] = share["precision"] = args.precision
    return {
        "single": JobSpec.model_validate({**data, "resources": {"num_processes": 1}}),
        "ranks": JobSpec.model_validate({**data, "resources": {"num_processes": args.ranks}}),
        "alone": JobSpec.model_validate(share),
        "beside": JobSpec.model_validate(share),
    }


def read_side(out: Path, side: str) -> tuple[list[float], Samples]:
    """A run's step times after the first (max over its processes at each step) and the
    first process's step 1 samples."""
    parts = [pickle.loads(p.read_bytes()) for p in sorted(out.glob(f"{side}-*.pkl"))]
    if not parts:
        raise RuntimeError(f"scaling: the {side} run left no step times")
    steps = [max(times) for times in zip(*(p[0] for p in parts), strict=True)]
    return steps[1:], parts[0][1]


SPIN = """
import sys, time
for line in sys.stdin:
    end, count = time.perf_counter() + float(line), 0
    while time.perf_counter() < end:
        for _ in range(1000):
            count += 1
    print(count, flush=True)
"""


def core_gain(processes: int, pairs: int = 20, seconds: float = 0.25) -> list[float]:
    """How much more work `processes` CPU-bound processes do at once than one alone, on this
    machine now: in each of `pairs` pairs of short windows, one process spins alone (each
    in its turn), then all at once, and the counts are compared. `processes` on a machine
    whose cores are free and independent; below it where they are not (a VM's vCPUs on one
    host core's hyperthreads, a busy host). 1/gain bounds any data-parallel ratio there.
    Windows this short, alternating, see the host's slow and fast moments alike."""
    spins = [
        subprocess.Popen(
            [sys.executable, "-c", SPIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(processes)
    ]

    def spin(members: list[subprocess.Popen[str]]) -> int:
        for member in members:
            assert member.stdin is not None
            member.stdin.write(f"{seconds}\n")
            member.stdin.flush()
        return sum(int(member.stdout.readline()) for member in members if member.stdout)

    try:
        spin(spins)  # warm-up
        return [spin(spins) / spin([spins[i % processes]]) for i in range(pairs)]
    finally:
        for member in spins:
            member.kill()
            member.wait()


def blocks(values: list[float], count: int) -> list[list[float]]:
    size = max(1, len(values) // count)
    return [values[i : i + size] for i in range(0, len(values) - size + 1, size)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, default=ROOT / "examples" / "arith-demo.yaml")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=8, help="for the ratio's spread")
    parser.add_argument("--precision", default=None, help="override the spec's (auto/fp32/bf16)")
    for name in ("side", "side-spec", "port", "out", "cache", "side-processes"):
        parser.add_argument(f"--{name}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        args.port, args.side_processes = int(args.port), int(args.side_processes)
        side_main(args)
        return
    cache = Path(os.environ.get("GRPO_CACHE_DIR", "~/.cache/grpo")).expanduser()
    specs = side_specs(args)
    gains = core_gain(args.ranks)
    processes = {"single": 1, "ranks": 1, "alone": 1, "beside": args.ranks}  # turn members
    with tempfile.TemporaryDirectory() as tmp, socket.create_server(("127.0.0.1", 0)) as server:
        out, port = Path(tmp), server.getsockname()[1]
        children = []
        for side in SIDES:
            (out / f"{side}.json").write_text(specs[side].model_dump_json())
            command = [sys.executable, __file__, "--side", side, "--side-spec",
                       str(out / f"{side}.json"), "--port", str(port), "--out", str(out),
                       "--cache", str(cache), "--side-processes", str(processes[side])]  # fmt: skip
            children.append(subprocess.Popen(command, stdin=subprocess.DEVNULL))
        server.settimeout(600)
        load = os.getloadavg()[0]
        runs = take_turns(server, processes)
        failed = [side for side, child in zip(SIDES, children, strict=True) if child.wait()]
        if failed:
            raise SystemExit(f"scaling: the {', '.join(failed)} run failed")
        times = {side: read_side(out, side) for side in SIDES}
    single, ranks = times["single"][0], times["ranks"][0]
    t1, t2 = statistics.median(single), statistics.median(ranks)
    pairs = zip(blocks(single, args.blocks), blocks(ranks, args.blocks), strict=False)
    ratios = [statistics.median(b) / statistics.median(a) for a, b in pairs]
    first_single, first_ranks = times["single"][1], times["ranks"][1]
    equal = sum(a == b for a, b in zip(first_single, first_ranks, strict=True))
    same = equal / len(first_single)
    w1, w2 = (statistics.median(runs[side].walls[1:]) for side in ("single", "ranks"))
    alone, beside = (statistics.median(times[side][0]) for side in ("alone", "beside"))
    part = specs["alone"].prompts_per_step
    print(
        f"cores: {os.cpu_count()}; spec {args.spec.name}, {args.steps} steps a run, turn by "
        f"turn; load average before {load:.1f}"
    )
    n = args.ranks
    print(f"median step: 1 process 1 thread {t1:.3f} s, {n} ranks 1 thread each {t2:.3f} s")
    print(f"median turn to turn: 1 process {w1:.3f} s, {n} ranks {w2:.3f} s, ratio {w2 / w1:.3f}")
    print(
        f"one process on {part} of {specs['single'].prompts_per_step} prompts: alone "
        f"{alone:.3f} s a step ({alone / t1:.3f} of the full step), {args.ranks} at once "
        f"without communicating {beside:.3f} s ({beside / t1:.3f})"
    )
    print(
        f"{args.ranks} CPU-bound processes at once do {statistics.median(gains):.2f}x the "
        f"work of one (min {min(gains):.2f}, max {max(gains):.2f}): no ratio below "
        f"{1 / statistics.median(gains):.3f} is possible on this machine now"
    )
    print(
        f"ratio over {len(ratios)} blocks of {max(1, len(single) // args.blocks)} steps: median "
        f"{statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}"
    )
    print(f"scaling: ranks={args.ranks} step_time_ratio={t2 / t1:.3f} samples_identical={same:.3f}")


if __name__ == "__main__":
    main()
