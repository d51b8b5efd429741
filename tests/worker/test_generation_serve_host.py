"""A generation worker (`grpo worker --generation`, worker/generation.py) refuses to start on a
serve host that GRPO_VLLM_SERVER_HOSTS does not allow on every port: training workers check
its servers' URLs against the same setting, with the same rule (grpo/spec/endpoints.py), and
would fail every run it serves. No server starts here: the refusal comes first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo.spec.vllm import DEFAULT_VLLM_SERVER_HOSTS
from tests.stack import ROOT
from worker.generation import serve_host_problem, server_url


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1", DEFAULT_VLLM_SERVER_HOSTS),
        ("10.1.2.3", ("10.1.2.3",)),
        ("GPU-1.example", ("gpu-1.example",)),  # host names compare lower-case
        ("fd00::5", ("fd00::5",)),
        ("[fd00::5]", ("fd00::5",)),  # bracketed as in a URL
    ],
)
def test_a_host_the_setting_allows_on_every_port_is_taken(
    host: str, allowed: tuple[str, ...]
) -> None:
    assert serve_host_problem(host, allowed) is None


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("10.1.2.3", DEFAULT_VLLM_SERVER_HOSTS),
        ("10.1.2.3", ("10.1.2.3:8000",)),  # one port only: each server takes a free port
        ("10.1.2.3", ()),
        ("not a host", ("not a host",)),
    ],
)
def test_a_host_the_setting_does_not_allow_on_every_port_is_refused(
    host: str, allowed: tuple[str, ...]
) -> None:
    problem = serve_host_problem(host, allowed)
    assert problem is not None and repr(host) in problem


def test_server_urls_bracket_an_ipv6_host() -> None:
    assert server_url("fd00::5", 8000) == "http://[fd00::5]:8000"
    assert server_url("10.1.2.3") == "http://10.1.2.3"


def test_the_worker_refuses_to_start_with_exit_code_2_saying_why(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env.update({"GRPO_DATA_DIR": str(tmp_path), "GRPO_VLLM_SERVER_HOSTS": "127.0.0.1"})
    done = subprocess.run(
        [sys.executable, "-m", "worker.cli", "--generation", "--serve-host", "10.1.2.3"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "GRPO_VLLM_SERVER_HOSTS does not allow on every port" in done.stderr, done.stderr
    assert "allowed: 127.0.0.1" in done.stderr and "ready" not in done.stderr
