"""`grpo submit` prints the spec check's warnings (the new-run page's: a model with random
weights cannot learn), a line each on stderr, and submits all the same; the REST client
answers them too (issue 44). The CLI's submit and client against the real app and store in
the test process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.cli_client import submit
from app.main import create_app
from grpo.client import GrpoClient
from tests.store_fixture import store

__all__ = ["store"]

SPEC = {"name": "warned", "max_steps": 2, "resources": {"queue": "parked"}}


@pytest.fixture
def client(store: str) -> Iterator[GrpoClient]:
    client = GrpoClient("http://localhost")
    with TestClient(create_app(), base_url="http://localhost") as http:
        client.http = http  # the in-process app answers instead of a socket
        yield client


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_submit_prints_each_warning_and_submits(
    client: GrpoClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({**SPEC, "model": "builtin:small"}))
    assert submit(client, str(spec), follow=False) == 0
    out, err = capsys.readouterr()
    (run,) = client.runs()
    assert out == f"run {run['id']} queued: warned\n"
    (line,) = err.splitlines()
    assert line.startswith(
        "warning: model: builtin:small has random weights: a run on it cannot learn; "
        "use builtin:small-arith (trained; first use builds it, about 4 min)"
    )

    spec.write_text(json.dumps({**SPEC, "model": "builtin:small-arith"}))  # trained: none
    assert submit(client, str(spec), follow=False) == 0
    assert capsys.readouterr().err == ""
    assert len(client.runs()) == 2


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_the_client_answers_warnings_apart_from_problems(client: GrpoClient) -> None:
    (warning,) = client.spec_warnings({**SPEC, "model": "builtin:tiny"})
    assert warning["loc"] == "model" and "use builtin:tiny-arith" in warning["message"]
    checked = client.check({**SPEC, "model": "builtin:tiny", "num_generations": 1})
    assert [p["loc"] for p in checked["problems"]] == ["num_generations"]
    assert checked["warnings"] == [warning]
    assert client.spec_warnings({**SPEC, "model": "builtin:tiny-arith"}) == []
