"""`grpo up` on a port that is taken: one error naming GRPO_PORT, exit 1, before anything
else is printed or started (no dashboard URL that may be someone else's, no restart loop)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

GRPO = str(Path(sys.executable).parent / "grpo")


@pytest.mark.parametrize("how", ["GRPO_PORT", "--port"])
def test_a_taken_port_is_one_clear_error(tmp_path: Path, how: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
        env["GRPO_DATA_DIR"] = str(tmp_path / "data")
        argv = [GRPO, "up"]
        if how == "GRPO_PORT":
            env["GRPO_PORT"] = str(port)
        else:
            argv += ["--port", str(port)]
        # a restart loop or a server that starts anyway never exits: the timeout bounds that
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stdout == ""  # no "dashboard at ..." line
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: port {port} on 127.0.0.1 is already in use")
    assert "set GRPO_PORT to a free port, e.g. `GRPO_PORT=" in lines[0]
    assert not (tmp_path / "data").exists()  # nothing migrated, nothing started


def test_a_free_port_is_no_problem() -> None:
    from app.cli import port_problem

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert port_problem("127.0.0.1", port) is None
    assert "cannot listen on 192.0.2.1" in (port_problem("192.0.2.1", port) or "")
