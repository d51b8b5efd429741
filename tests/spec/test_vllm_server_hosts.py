"""Where a `vllm_mode: server` run's vLLM server may be (GRPO_VLLM_SERVER_HOSTS): the run
sends it requests and its weights, so a host the operator has not listed is refused, by
one rule (grpo/spec/vllm.py's `vllm_server_refusal`, the hosts matched as
GRPO_REWARD_HOSTS'): at submit a 422 naming the field, on the worker (a spec stored before
the setting changed) and in `grpo train` the same message before anything loads or
connects. Unset, the setting allows this machine only.

The real app, store and filesystem broker in the test process (FastAPI's TestClient), as
tests/spec/test_spec_hardening.py uses them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings, get_settings
from app.store import db, runs
from app.store.models import RunStatus
from grpo.cli.main import main
from grpo.spec import JobSpec
from grpo.spec.vllm import DEFAULT_VLLM_SERVER_HOSTS, vllm_server_refusal
from tests.store_fixture import store
from worker.job import run_job

__all__ = ["store"]

SPEC: dict[str, Any] = {
    "name": "vllm-server-hosts",
    "model": "builtin:tiny",
    "max_steps": 2,
    "num_generations": 2,
    "use_vllm": True,
    "vllm_mode": "server",
    "resources": {"queue": "parked-no-worker"},
}
SETTING = "GRPO_VLLM_SERVER_HOSTS"


def refusal(fields: dict[str, Any], allowed: tuple[str, ...]) -> tuple[str, str] | None:
    return vllm_server_refusal(JobSpec.model_validate({**SPEC, **fields}), allowed)


@pytest.mark.parametrize(
    "fields",
    [
        {},  # TRL's default host, 0.0.0.0, which connects to this machine's loopback
        {"vllm_server_base_url": "http://127.0.0.1:8000"},
        {"vllm_server_base_url": "http://localhost:8123/"},
        {"vllm_server_base_url": "http://[::1]:8000"},
        {"vllm_server_host": "::1", "vllm_server_port": 8001},  # bracketed in the URL
        {"vllm_server_host": "LOCALHOST"},
        {"vllm_mode": "colocate", "vllm_server_base_url": "http://10.0.0.7:8000"},  # not used
    ],
)
def test_this_machine_is_allowed_by_default(fields: dict[str, Any]) -> None:
    assert refusal(fields, DEFAULT_VLLM_SERVER_HOSTS) is None


def test_the_setting_lists_this_machine_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SETTING, raising=False)
    assert Settings().vllm_server_host_list == list(DEFAULT_VLLM_SERVER_HOSTS)
    monkeypatch.setenv(SETTING, " Gen.Internal:8000, ,10.0.0.7")  # as GRPO_REWARD_HOSTS reads
    assert Settings().vllm_server_host_list == ["gen.internal:8000", "10.0.0.7"]


@pytest.mark.parametrize(
    ("fields", "allowed", "field", "named"),
    [
        ({"vllm_server_base_url": "http://169.254.169.254/latest"}, DEFAULT_VLLM_SERVER_HOSTS,
         "vllm_server_base_url", "'169.254.169.254'"),
        ({"vllm_server_host": "10.0.0.7"}, DEFAULT_VLLM_SERVER_HOSTS,
         "vllm_server_host", "'10.0.0.7:8000'"),
        ({"vllm_server_base_url": "http://127.0.0.2:8000"}, DEFAULT_VLLM_SERVER_HOSTS,
         "vllm_server_base_url", "'127.0.0.2:8000'"),  # listed hosts only, not the /8
        ({"vllm_server_base_url": "http://gen.internal:9000"}, ("gen.internal:8000",),
         "vllm_server_base_url", "'gen.internal:9000'"),  # host:port allows that port only
        ({"vllm_server_base_url": "http://127.0.0.1:8000"}, (),
         "vllm_server_base_url", "allowed: none"),
    ],
)  # fmt: skip
def test_other_hosts_are_refused_naming_the_field_and_the_setting(
    fields: dict[str, Any], allowed: tuple[str, ...], field: str, named: str
) -> None:
    refused = refusal(fields, allowed)
    assert refused is not None and refused[0] == field
    assert named in refused[1] and SETTING in refused[1], refused


def test_a_base_url_that_breaks_the_url_rule_is_refused_by_the_rule() -> None:
    """The rule every URL of a spec follows (grpo/spec/endpoints.py): no list matches it."""
    refused = refusal({"vllm_server_base_url": "http://evil.example@127.0.0.1:8000"}, ("*",))
    assert refused is not None and refused[0] == "vllm_server_base_url"
    assert "user info" in refused[1]


@pytest.fixture
def api(store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The app with GRPO_VLLM_SERVER_HOSTS unset: this machine only."""
    monkeypatch.delenv(SETTING, raising=False)
    get_settings.cache_clear()
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client
    get_settings.cache_clear()


def the_field(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    [field] = response.json()["error"]["fields"]
    return dict(field)


def test_submit_refuses_a_server_elsewhere_and_accepts_loopback(api: TestClient) -> None:
    refused = the_field(
        api.post("/api/runs", json={**SPEC, "vllm_server_base_url": "http://10.0.0.7:8000"})
    )
    assert refused["loc"] == "vllm_server_base_url", refused
    assert "'10.0.0.7:8000'" in refused["message"] and SETTING in refused["message"]
    refused = the_field(api.post("/api/runs", json={**SPEC, "vllm_server_host": "gen.example"}))
    assert refused["loc"] == "vllm_server_host" and SETTING in refused["message"], refused
    accepted = api.post("/api/runs", json={**SPEC, "vllm_server_base_url": "http://127.0.0.1:8000"})
    assert accepted.status_code == 201, accepted.text
    patch = {"vllm_server_base_url": "http://metadata.internal/"}  # clone: the same check
    cloned = api.post(f"/api/runs/{accepted.json()['id']}/clone", json={"patch": patch})
    assert the_field(cloned)["loc"] == "vllm_server_base_url"


def test_the_worker_refuses_a_run_stored_before_the_setting_changed(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Submitted while loopback was allowed; the operator then lists only gen.internal. The
    worker claims the run and fails it with the API's message before any rank starts."""
    response = api.post("/api/runs", json={**SPEC, "vllm_server_base_url": "http://127.0.0.1:8000"})
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    monkeypatch.setenv(SETTING, "gen.internal")
    get_settings.cache_clear()
    submitted = the_field(api.post("/api/runs", json={**SPEC, **response.json()["spec"]}))
    run_job(run_id)
    run = db.call(runs.get_run, run_id)
    assert run is not None and run.status == RunStatus.FAILED
    assert run.error == f"vllm_server_base_url: {submitted['message']}", run.error
    assert "(allowed: gen.internal)" in run.error


def test_grpo_train_applies_the_same_setting_from_its_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`grpo train` reads GRPO_VLLM_SERVER_HOSTS as the service does (grpo/run/local.py) and
    refuses before the model loads; the same words as the worker's."""
    monkeypatch.setenv(SETTING, "gen.internal")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # main() would set it in this process
    monkeypatch.setenv("OMP_NUM_THREADS", str(torch.get_num_threads()))  # and torch's threads
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "model: builtin:tiny\nuse_vllm: true\nvllm_mode: server\n"
        "vllm_server_base_url: http://127.0.0.1:8000\n"
    )
    code = main(["train", str(spec), "--workdir", str(tmp_path / "run")])
    expected = refusal({"vllm_server_base_url": "http://127.0.0.1:8000"}, ("gen.internal",))
    assert expected is not None
    assert code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the threads line
    assert last == f"error: vllm_server_base_url: {expected[1]}"
    assert not (tmp_path / "run" / "checkpoints").exists()
