"""`grpo rewards test` and `grpo rewards preflight`: the service parser, the client, and the
real app in this process (its TestClient is the client's HTTP connection), printing tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.cli import build_parser
from app.cli_rewards import rewards
from grpo.client import GrpoClient
from tests.rewards.test_reward_trials import api, store

__all__ = ["api", "store"]

SPEC = """
model: builtin:tiny
rewards:
  - name: accuracy
  - name: python
    function: crashes
"""


def grpo_rewards(api: TestClient, *argv: str) -> int:
    client = GrpoClient("http://localhost")
    client.http = api  # type: ignore[assignment]  # TestClient: an httpx client of the app
    return rewards(build_parser().parse_args(["rewards", *argv]), client)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_rewards_test_prints_a_score_or_a_failure_per_sample_and_function(
    api: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    samples = [
        {"prompt": "2+2=", "answer": "4", "completion": "<answer>4</answer>"},
        {"prompt": "2+2=", "answer": "4", "completion": ""},
    ]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    code = grpo_rewards(api, "test", str(tmp_path / "spec.yaml"), str(tmp_path / "samples.jsonl"))
    out = capsys.readouterr().out.splitlines()
    assert code == 1  # a function failed
    assert out[0].split() == ["sample", "accuracy", "crashes"]
    assert out[1].split()[:2] == ["0", "1"] and out[1].split()[4] == "0.05556"
    assert out[2].split()[:2] == ["1", "0"] and out[2].split()[-1] == "runtime_error"
    assert out[3] == "sample 1 crashes: runtime_error: ZeroDivisionError: float division by zero"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_rewards_preflight_prints_each_probes_mean_and_the_holes(
    api: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "spec.yaml").write_text(
        "model: builtin:tiny\nrewards: [{name: accuracy}, {name: format, weight: 0.5}]\n"
    )
    code = grpo_rewards(api, "preflight", str(tmp_path / "spec.yaml"), "--records", "2")
    out = capsys.readouterr().out.splitlines()
    assert code == 1 and out[0] == "2 records probed"
    table = {line.split()[0]: line.split()[1:] for line in out[2:12]}
    assert table["correct"] == ["1", "1"] and table["format_wrong_answer"] == ["0", "1"]
    assert (
        "- format-only completions (the format around a wrong answer) score 1 on `format` — the "
        "model can earn 33% of the total reward of a correct completion without solving anything"
    ) in out
    missing = grpo_rewards(api, "preflight", str(tmp_path / "nope.yaml"))
    assert missing == 2 and "nope.yaml" in capsys.readouterr().err
