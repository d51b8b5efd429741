"""`grpo submit` uploads a spec's local data file only once the rest of the spec passes the
server's check: a spec refused for another field (an unknown reward, a misspelt knob) is
submitted as it is and refused with every problem, its file not stored (issue 44's
newcomer retry: a model path refusal came after the file had gone up, and each corrected
try stored it again). The CLI's submit against the real app and store in the test process;
a spec that passes goes up as before (tests/cli/test_cli_upload.py, on a running service)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli_client import submit
from grpo.client import ApiClientError, GrpoClient
from tests.cli.test_submit_warnings import client
from tests.store_fixture import store

__all__ = ["client", "store"]

SPEC = {
    "name": "local-data",
    "model": "builtin:tiny-arith",
    "max_steps": 2,
    "data": {"source": "prompts.jsonl"},
    "resources": {"queue": "parked"},
}


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_spec_with_other_problems_is_refused_before_its_file_goes_up(
    client: GrpoClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    records = [{"prompt": "2+2=", "answer": "4"}, {"prompt": "3+5=", "answer": "8"}]
    (tmp_path / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    spec = tmp_path / "spec.json"
    bad = {**SPEC, "rewards": [{"name": "python", "function": "no_such_reward"}]}
    spec.write_text(json.dumps({**bad, "num_generation": 4}))

    with pytest.raises(ApiClientError) as refused:
        submit(client, str(spec), follow=False)
    said = capsys.readouterr().err
    assert said.startswith("data.source prompts.jsonl: not uploaded: the spec has problems")
    assert "(num_generation, rewards.0.function)" in said
    assert client.datasets() == [] and client.runs() == []
    assert "rewards.0.function" in str(refused.value)  # every problem, the path's too
    assert "data.source" in str(refused.value)
