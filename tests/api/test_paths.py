"""Paths in a spec never lead outside the allowed roots: through submit, through clone, and
again in the worker when the API was told otherwise (issue 10, item 7)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.test_api_runs import parked_spec
from tests.stack import Stack, running_stack
from tests.worker.test_run_lifecycle import wait_for_final

DATA_ESCAPES = [
    "app/../../../../etc/passwd",
    "../../etc/passwd.jsonl",
    "datasets/../../../../etc/passwd",
    "datasets/./x/../../../../../etc/passwd",
    "datasets//..//..//..//..//etc//passwd",
    "datasets/../grpo.db",  # inside the data directory, outside the datasets
    "%2e%2e/%2e%2e/etc/passwd",
    "..%2f..%2fetc%2fpasswd",
    "/etc/passwd",
    "file:///etc/passwd",
    "file:../../etc/passwd",
    "~/.bashrc",
    "~root/.bashrc",
    "datasets/escape.jsonl",  # a symlink out of the root, made by the test
]
MODEL_ESCAPES = [
    "grpo/../../outside",
    "/etc",
    "../../etc",
    "./../../etc",
    "~/.cache",
    "file:/etc",
    "hf:../etc",
]

REFUSALS = [("data.source", s) for s in DATA_ESCAPES] + [("model", m) for m in MODEL_ESCAPES]


def _plant_symlink(stack: Stack) -> None:
    link = stack.data_dir / "datasets" / "escape.jsonl"
    link.parent.mkdir(exist_ok=True)
    if not link.is_symlink():
        link.symlink_to("/etc/passwd")


def _assert_refused(response: httpx.Response, loc: str, text: str) -> None:
    assert response.status_code == 422, (text, response.text)
    error = response.json()["error"]
    assert error["fields"][0]["loc"] == loc, (text, error)


def _overrides(loc: str, text: str) -> dict[str, object]:
    return {"data": {"source": text}} if loc == "data.source" else {"model": text}


@pytest.mark.parametrize("via", ["submit", "clone"])
def test_every_traversal_form_is_refused(stack: Stack, via: str) -> None:
    _plant_symlink(stack)
    with stack.client() as client:
        base = client.post("/api/runs", json=parked_spec(stack)).json()["id"]
        for loc, text in REFUSALS:
            overrides = _overrides(loc, text)
            if via == "submit":
                response = client.post("/api/runs", json=parked_spec(stack, **overrides))
            else:
                response = client.post(f"/api/runs/{base}/clone", json={"patch": overrides})
            _assert_refused(response, loc, text)


def test_refusals_read_the_same_whether_the_outside_file_exists(stack: Stack) -> None:
    with stack.client() as client:
        messages = []
        for name in ("passwd", "no-such-file-here"):
            spec = parked_spec(stack, data={"source": f"../../../../etc/{name}"})
            message = client.post("/api/runs", json=spec).json()["error"]["message"]
            messages.append(message.replace(name, "NAME"))
        assert messages[0] == messages[1]


def test_a_refusal_says_how_paths_resolve_which_roots_hold_them_and_to_upload(
    embedded_stack: Stack,
) -> None:
    stack = embedded_stack
    base = stack.data_dir.resolve()
    with stack.client() as client:
        data = client.post("/api/runs", json=parked_spec(stack, data={"source": "p.jsonl"}))
        model = client.post("/api/runs", json=parked_spec(stack, model="./my-model"))
    _assert_refused(data, "data.source", "p.jsonl")
    assert data.json()["error"]["fields"][0]["message"] == (
        f"local dataset path 'p.jsonl' is outside the allowed roots ({base / 'datasets'}): a "
        f"relative path resolves against GRPO_DATA_DIR ({base}); local data files must lie "
        "inside GRPO_DATA_DIR/datasets (the uploaded datasets) or GRPO_MODEL_ROOTS, a setting "
        "the service reads when it starts: restart it after changing it; or upload it as a "
        "dataset (`grpo submit` does this for you)"
    )
    _assert_refused(model, "model", "./my-model")
    assert model.json()["error"]["fields"][0]["message"] == (
        "local model path './my-model' is outside the allowed roots (none configured): a "
        f"relative path resolves against GRPO_DATA_DIR ({base}); local models must lie inside "
        "GRPO_MODEL_ROOTS (comma-separated directories; set it to allow this one), a setting "
        "the service reads when it starts: restart it after changing it"
    )


def test_relative_paths_inside_the_roots_are_accepted(stack: Stack) -> None:
    datasets = stack.data_dir / "datasets"
    datasets.mkdir(exist_ok=True)
    (datasets / "local.jsonl").write_text('{"prompt": "1+1=", "answer": "2"}\n')
    with stack.client() as client:
        for source in ("datasets/local.jsonl", f"file:{datasets / 'local.jsonl'}"):
            response = client.post("/api/runs", json=parked_spec(stack, data={"source": source}))
            assert response.status_code == 201, response.text


@pytest.fixture(scope="module")
def trusting_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """An API told every path is fine (GRPO_MODEL_ROOTS=/) and a worker told nothing."""
    data_dir = tmp_path_factory.mktemp("trusting")
    # offline: a hub id fails at once instead of after the hub client's retries; the API's
    # hub check off, so a hub-shaped id reaches the worker (what these tests are about)
    env = {"GRPO_MODEL_ROOTS": "/", "HF_HUB_OFFLINE": "1", "GRPO_CHECK_HUB_MODELS": "false"}
    with running_stack(data_dir, extra_env=env, with_worker=False) as stack:
        stack.env = {k: v for k, v in stack.env.items() if k != "GRPO_MODEL_ROOTS"}
        stack.start_worker()
        yield stack


def test_the_worker_rechecks_the_roots_before_opening_anything(
    trusting_api: Stack, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"prompt": "the secret prompt", "answer": "42"}\n')
    errors = []
    with trusting_api.client() as client:
        for path in (secret, tmp_path / "absent.jsonl"):
            spec = {"name": "escape", "model": "builtin:tiny", "data": {"source": str(path)}}
            response = client.post("/api/runs", json=spec)
            assert response.status_code == 201, response.text
            run = wait_for_final(client, response.json()["id"])
            assert run["status"] == "failed", run
            errors.append(run["error"].replace(path.name, "NAME"))
            logs = client.get(f"/api/runs/{run['id']}/logs").text
            assert "the secret prompt" not in logs
    assert "outside the allowed roots" in errors[0]
    assert errors[0] == errors[1]


def _plant_loop(folder: Path) -> Path:
    """`loop/a` -> `loop/b` -> `loop/a`: resolving either never ends."""
    loop = folder / "loop"
    loop.mkdir(parents=True, exist_ok=True)
    for name, other in (("a", "b"), ("b", "a")):
        if not (loop / name).is_symlink():
            (loop / name).symlink_to(loop / other)
    return loop


def test_a_symlink_loop_inside_a_root_is_a_422_naming_the_field(
    trusting_api: Stack, tmp_path: Path
) -> None:
    """Any path field: the data source (inside the datasets root), the model and a reward
    model (inside GRPO_MODEL_ROOTS=/)."""
    data_loop = _plant_loop(trusting_api.data_dir / "datasets")
    model_loop = _plant_loop(tmp_path)
    cases = [
        ("data.source", {"data": {"source": str(data_loop / "a" / "x.jsonl")}}),
        ("model", {"model": str(model_loop / "a")}),
        ("rewards.0.model", {"rewards": [{"name": "model", "model": str(model_loop / "b")}]}),
    ]
    with trusting_api.client() as client:
        for loc, overrides in cases:
            response = client.post("/api/runs", json=parked_spec(trusting_api, **overrides))
            _assert_refused(response, loc, str(overrides))
            assert "symlink loop" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    "netloc",
    ["127.0.0.1:18999:80", "127.0.0.1:+18999", "127.0.0.1:\uff11\uff18\uff19", "h:99999", "h:"],
)
def test_a_reward_url_with_a_malformed_port_is_a_422_naming_the_url(
    stack: Stack, netloc: str
) -> None:
    rewards = [{"name": "http", "url": f"http://{netloc}/score"}]
    with stack.client() as client:
        response = client.post("/api/runs", json=parked_spec(stack, rewards=rewards))
    _assert_refused(response, "rewards.0.http.url", netloc)


def test_a_hub_id_is_never_read_from_the_workers_directory(trusting_api: Stack) -> None:
    """The worker was started in the repository, where `app/main.py` exists: its run fails
    exactly as one naming a file that exists nowhere."""
    errors = []
    with trusting_api.client() as client:
        for name in ("app/main.py", "app/nope.py"):
            spec = {"name": "hub", "model": name, "max_steps": 1}
            run = wait_for_final(client, client.post("/api/runs", json=spec).json()["id"])
            assert run["status"] == "failed", run
            errors.append(run["error"].replace(name, "NAME"))
    assert errors[0] == errors[1]
