"""`grpo rescore RUN REWARDS`: the service parser, the client, the real app in this process
(its TestClient is the client's HTTP connection) and a thread doing a worker's part (the
replay's task function), printing what changed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.cli import build_parser
from app.cli_rescore import rescore
from app.store import db, rescores
from grpo.client import GrpoClient
from tests.rewards.test_rescore import api, hand_made_run, store
from worker.rescore import rescore_job

__all__ = ["api", "store"]


def grpo_rescore(api: TestClient, *argv: str) -> int:
    client = GrpoClient("http://localhost")
    client.http = api  # type: ignore[assignment]  # TestClient: an httpx client of the app
    return rescore(build_parser().parse_args(["rescore", *argv]), client, poll_s=0.05)


def worker_for(run_id: str) -> threading.Thread:
    """Runs the run's first replay once it is queued, as a worker's task would."""

    def work() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            queued = db.call(rescores.list_rescores, run_id)
            if queued:
                rescore_job(queued[0].id)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_rescore_prints_the_distributions_and_each_flipped_advantage(
    api: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = hand_made_run(api)
    (tmp_path / "rewards.yaml").write_text("rewards:\n  - name: accuracy\n")
    worker = worker_for(run_id)
    code = grpo_rescore(api, run_id, str(tmp_path / "rewards.yaml"), "--steps", "1")
    worker.join(timeout=30)
    out = capsys.readouterr().out.splitlines()
    assert code == 0, out
    assert out[0] == f"replay 1 of run {run_id} queued: steps [1]"
    assert out[1] == "2 groups, 8 completions: 1 groups with 1 advantages that changed sign"
    assert out[2].split()[:5] == ["reward", "mean", "0.125", "->", "0.25"]
    assert out[4] == "step 1 group 0 (hand-0) completion 2: advantage -0.577 -> +1.000 (+1.577)"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_rescore_says_what_the_server_refused(
    api: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = hand_made_run(api)
    (tmp_path / "rewards.yaml").write_text("- name: accuracy\n")
    assert grpo_rescore(api, run_id, str(tmp_path / "rewards.yaml"), "--steps", "7") == 2
    assert "steps: no stored completions at 7" in capsys.readouterr().err
