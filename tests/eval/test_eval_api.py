"""The spec's `eval` through the real app and store: a local eval source outside the allowed
roots is refused like data.source, a bad eval section is a 422 naming it, and a run's
evaluations are read back (step 0 included) with or without their examples."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.store import db, evals, runs
from app.store.lease import Lease
from grpo.report import EvalReport
from grpo.spec import JobSpec
from tests.store_fixture import store

__all__ = ["store"]
SPEC = {"model": "builtin:tiny", "max_steps": 4}


@pytest.fixture
def api(store: str) -> Iterator[TestClient]:
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


def test_eval_sections_are_checked_at_submit(api: TestClient) -> None:
    outside = api.post("/api/runs", json={**SPEC, "eval": {"source": "../../etc/passwd"}})
    assert outside.status_code == 422
    assert outside.json()["error"]["fields"][0]["loc"] == "eval.source"
    unknown = api.post("/api/runs", json={**SPEC, "eval": {"source": "dataset:nope"}})
    assert unknown.status_code == 422 and "unknown dataset" in unknown.text
    greedy_k = api.post("/api/runs", json={**SPEC, "eval": {"num_samples": 4}})
    assert greedy_k.status_code == 422 and "temperature > 0" in greedy_k.text
    endpoint = {"name": "http", "url": "http://evil.example/score"}
    refused = api.post("/api/runs", json={**SPEC, "eval": {"rewards": [endpoint]}})
    assert refused.status_code == 422
    assert refused.json()["error"]["fields"][0]["loc"] == "eval.rewards.0.url"
    fine = api.post("/api/runs", json={**SPEC, "eval": {"every_steps": 2}})
    assert fine.status_code == 201, fine.text
    assert fine.json()["spec"]["eval"]["split"] == "test"


def test_evaluations_are_read_back_by_step(api: TestClient) -> None:
    run, _ = db.call(runs.create_run, JobSpec(**SPEC, eval={}), package_version="t")  # type: ignore[arg-type]
    claimed = db.call(runs.claim_run, run.id, worker="w1", device="cpu")
    assert claimed is not None
    held = Lease.of(claimed)
    example = {"prompt_id": "1+1", "prompt": "1+1=", "answer": "2", "completions": ["2"],
               "rewards": {"accuracy": [1.0]}, "passes": [True]}  # fmt: skip
    for step, accuracy in [(0, 0.25), (2, 0.5), (2, 0.75)]:  # step 2 written again on resume
        scalars = {"eval/accuracy": accuracy}
        db.call(evals.save_eval, run.id, EvalReport(step, scalars, [example]), lease=held)
    url = f"/api/runs/{run.id}/evals"
    bare = api.get(url).json()["items"]
    assert bare == [
        {"step": 0, "metrics": {"eval/accuracy": 0.25}, "examples": None},
        {"step": 2, "metrics": {"eval/accuracy": 0.75}, "examples": None},
    ]
    one = api.get(url, params={"examples": "true", "step": 2}).json()["items"]
    assert [r["step"] for r in one] == [2] and one[0]["examples"] == [example]


def test_the_evaluation_before_training_is_the_metrics_of_step_0(api: TestClient) -> None:
    from app.store import steps
    from grpo.report import StepReport

    run, _ = db.call(runs.create_run, JobSpec(**SPEC, eval={}), package_version="t")  # type: ignore[arg-type]
    claimed = db.call(runs.claim_run, run.id, worker="w1", device="cpu")
    assert claimed is not None
    held = Lease.of(claimed)
    for accuracy in (0.125, 0.25):  # a run restarted from scratch evaluates step 0 again
        db.call(evals.save_eval, run.id, EvalReport(0, {"eval/accuracy": accuracy}), lease=held)
    db.call(steps.save_step, run.id, StepReport(1, 4, {"reward": 0.5}), lease=held)
    url = f"/api/runs/{run.id}"
    assert api.get(f"{url}/metrics").json()["items"] == [
        {"step": 0, "metrics": {"eval/accuracy": 0.25}},
        {"step": 1, "metrics": {"reward": 0.5}},
    ]
    after_0 = api.get(f"{url}/metrics", params={"after_step": 0}).json()["items"]
    assert [r["step"] for r in after_0] == [1]
    keyed = api.get(f"{url}/metrics", params={"keys": "eval/accuracy"}).json()["items"]
    assert keyed[0] == {"step": 0, "metrics": {"eval/accuracy": 0.25}}
    csv = api.get(f"{url}/export", params={"what": "metrics", "format": "csv"}).text.splitlines()
    assert csv[:3] == ["step,eval/accuracy,reward", "0,0.25,", "1,,0.5"]
    assert [r["step"] for r in api.get(f"{url}/histograms").json()["items"]] == [1]
    shown = api.get(url).json()
    assert shown["step"] == 1 and shown["last_metrics"] == {"reward": 0.5}


def test_summary_reads_like_a_report(api: TestClient) -> None:
    from app.store import checkpoints, steps
    from grpo.report import SavedCheckpoint, StepReport

    run, _ = db.call(runs.create_run, JobSpec(**SPEC, eval={}), package_version="t")  # type: ignore[arg-type]
    claimed = db.call(runs.claim_run, run.id, worker="w1", device="cpu")
    assert claimed is not None
    held = Lease.of(claimed)
    for step in range(1, 21):  # reward step/20: first decile (steps 1-2) .075, last (19-20) .975
        scalars = {
            "reward": step / 20, "kl": step / 100, "frac_reward_zero_std": 0.25 * (step % 2),
            "tokens_per_second": 100.3, "time/step": 0.5, "time/generate": 0.25,
            "time/reward/accuracy": 0.125,
        }  # fmt: skip
        db.call(steps.save_step, run.id, StepReport(step, 20, scalars), lease=held)
    for step, accuracy in [(0, 0.25), (10, 0.75), (20, 0.5)]:
        db.call(evals.save_eval, run.id, EvalReport(step, {"eval/accuracy": accuracy}), lease=held)
    for step, is_final in [(10, False), (20, True)]:
        saved = SavedCheckpoint(step, f"/x/step-{step:06d}", 7, is_final, (10, 20)[: step // 10])
        db.call(checkpoints.record_checkpoint, held, saved)

    summary = api.get(f"/api/runs/{run.id}/summary").json()
    assert summary["steps"] == 20  # step 0's metrics row is not a step trained
    assert summary["first_eval"] == {"step": 0, "metrics": {"eval/accuracy": 0.25}}
    assert summary["final_eval"] == {"step": 20, "metrics": {"eval/accuracy": 0.5}}
    assert summary["best_eval"] == {"step": 10, "metrics": {"eval/accuracy": 0.75}}
    assert summary["reward_first_decile"] == pytest.approx(0.075)
    assert summary["reward_last_decile"] == pytest.approx(0.975)
    assert summary["kl_end"] == pytest.approx(0.2)
    assert summary["no_signal_share"] == pytest.approx(0.125)
    assert summary["tokens_generated"] == 1003  # a count, not the float sum 1002.99999...
    assert summary["seconds_per_phase"] == {"step": 10.0, "generate": 5.0}
    assert (summary["checkpoint"]["step"], summary["checkpoint"]["is_final"]) == (20, True)

    empty, _ = db.call(runs.create_run, JobSpec(**SPEC), package_version="t")  # type: ignore[arg-type]
    bare = api.get(f"/api/runs/{empty.id}/summary").json()
    assert (bare["steps"], bare["final_eval"], bare["checkpoint"]) == (0, None, None)
    assert bare["tokens_generated"] == 0 and bare["seconds_per_phase"] == {}
