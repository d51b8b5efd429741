"""Threads that fit the machine (grpo/parallel/threads.py): torch's intra-op threads from
the devices held, unless the user set them, and a passive OpenMP wait."""

import subprocess
import sys

import pytest
import torch

from grpo.parallel.threads import (
    GPU_HOST_THREADS,
    apply_threads,
    prefer_passive_wait,
    threads_for,
    user_threads,
)


@pytest.mark.parametrize(
    ("kind", "devices", "ranks", "threads"),
    [("cpu", 2, 1, 2), ("cpu", 16, 4, 4), ("cpu", 3, 2, 1), ("cpu", 1, 4, 1),
     ("cuda", 8, 1, GPU_HOST_THREADS), ("cuda", 1, 1, GPU_HOST_THREADS)],
)  # fmt: skip
def test_threads_come_from_the_devices_held(kind, devices, ranks, threads):
    assert threads_for(kind, devices, ranks=ranks) == threads


def test_the_users_setting_is_kept(monkeypatch):
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert user_threads() == (3, "OMP_NUM_THREADS")
    before = torch.get_num_threads()
    choice = apply_threads("cpu", 8)
    assert (choice.threads, choice.source) == (3, "OMP_NUM_THREADS")
    assert torch.get_num_threads() == before  # torch read it itself when it loaded
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    prefer_passive_wait(env)
    assert env == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_otherwise_torch_gets_the_devices_share(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    try:
        choice = apply_threads("cpu", 2, ranks=2)
        assert (choice.threads, choice.source, torch.get_num_threads()) == (1, "devices", 1)
        assert choice.label.startswith("1 torch thread (from the devices held), OMP_WAIT_POLICY=")
    finally:
        torch.set_num_threads(before)
    env: dict[str, str] = {}
    prefer_passive_wait(env)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"}


def test_grpo_sets_the_passive_wait_before_torch_loads():
    code = (
        "import os, sys; from grpo.cli.main import main\n"
        "try: main(['eval', '--help'])\n"
        "except SystemExit: pass\n"
        "print(os.environ['OMP_WAIT_POLICY'], 'torch' in sys.modules)"
    )
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split()[-2:] == ["PASSIVE", "False"], out.stderr
