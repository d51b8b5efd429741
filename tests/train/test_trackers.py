"""Trackers (spec logging.report_to): TensorBoard event files that tensorboard's own event
reader reads back, an MLflow run that MLflow's own client finds in a local store, a W&B
offline run directory, and a missing tracker package named at submit. Each tracker's run
ends as its attempt ended, and a later attempt reopens the same runs without sending a step
twice."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from app.api.checks.trackers import check_trackers
from app.api.errors import ApiError
from grpo.report import EvalReport, StepReport
from grpo.report.trackers import Trackers
from grpo.spec import JobSpec
from tests.tracker_logs import (
    mlflow_history,
    mlflow_runs,
    wandb_exit_code,
    wandb_logs,
    wandb_metric,
)

SPEC = JobSpec(logging={"report_to": ["tensorboard"]})


def test_tensorboard_event_files_hold_scalars_histograms_and_eval(tmp_path: Path) -> None:
    trackers = Trackers(SPEC, tmp_path)
    reward_bins = [0] * 30  # bins of 0.1 on [-1, 2]
    reward_bins[10], reward_bins[20] = 3, 5  # 3 rewards in [0, .1), 5 in [1, 1.1)
    for step in (1, 2):
        scalars = {
            "reward": 0.25 * step,
            "kl": 0.01,
            **({"eval/accuracy": 0.75} if step == 2 else {}),
        }
        trackers.log_step(StepReport(step, 2, scalars, reward_histogram=reward_bins))
    trackers.log_eval(EvalReport(0, {"eval/accuracy": 0.5}))
    trackers.log_eval(EvalReport(2, {"eval/accuracy": 0.75}))
    trackers.close("succeeded")

    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(s.step, s.value) for s in events.Scalars("reward")] == [(1, 0.25), (2, 0.5)]
    assert [(s.step, s.value) for s in events.Scalars("eval/accuracy")] == [(0, 0.5), (2, 0.75)]
    histogram = events.Histograms("reward_histogram")[-1]
    value = histogram.histogram_value
    assert histogram.step == 2 and value.num == 8
    assert value.sum == pytest.approx(3 * 0.05 + 5 * 1.05)


def test_mlflow_local_store_holds_the_runs_scalars_and_eval_metrics(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'store.db'}"  # offline; MLflow 3 refuses bare file stores
    spec = JobSpec(logging={"report_to": ["mlflow"]})
    trackers = Trackers(spec, tmp_path / "run", run_name="run-1", mlflow_uri=uri)
    for step in (1, 2):
        scalars = {"reward": 0.25 * step, **({"eval/accuracy": 0.75} if step == 2 else {})}
        trackers.log_step(StepReport(step, 2, scalars))
    trackers.log_eval(EvalReport(0, {"eval/accuracy": 0.5, "eval/pass@k": 0.5}))
    trackers.log_eval(EvalReport(2, {"eval/accuracy": 0.75, "eval/pass@k": 1.0}))
    trackers.close("succeeded")

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("grpo")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "run-1" and run.info.status == "FINISHED"

    def history(key: str) -> list[tuple[int, float]]:
        return sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))

    assert history("reward") == [(1, 0.25), (2, 0.5)]
    assert history("eval/accuracy") == [(0, 0.5), (2, 0.75)]  # once per eval, not per step
    assert history("eval/pass_k") == [(0, 0.5), (2, 1.0)]  # '@' is not a legal MLflow name
    assert not (tmp_path / "run" / "mlflow.db").exists()  # the operator's URI, not the default


def test_mlflow_defaults_to_a_sqlite_store_in_the_run_directory(tmp_path: Path) -> None:
    trackers = Trackers(JobSpec(logging={"report_to": ["mlflow"]}), tmp_path / "run-2")
    trackers.log_step(StepReport(1, 1, {"reward": 1.0}))
    trackers.close("succeeded")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'run-2' / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("grpo").experiment_id])
    assert run.info.run_name == "run-2"
    assert [m.value for m in client.get_metric_history(run.info.run_id, "reward")] == [1.0]


def test_mlflow_file_store_holds_a_metric_beside_its_sub_metrics(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    trackers = Trackers(
        JobSpec(logging={"report_to": ["mlflow"]}), tmp_path / "run", mlflow_uri=uri
    )
    trackers.log_step(StepReport(1, 1, {"time/reward": 0.5, "time/reward/accuracy": 0.25}))
    trackers.close("succeeded")
    (run,) = mlflow_runs(uri)  # a file, time/reward, beside a directory of that name: refused
    assert mlflow_history(uri, run, "time.reward") == [(1, 0.5)]
    assert mlflow_history(uri, run, "time.reward.accuracy") == [(1, 0.25)]


def test_wandb_offline_run_directory_holds_the_runs_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    spec = JobSpec(logging={"report_to": ["wandb"]})
    trackers = Trackers(spec, tmp_path / "run", run_name="run-3")
    reward_bins = [0] * 30
    reward_bins[10] = 4
    trackers.log_eval(EvalReport(0, {"eval/accuracy": 0.5}))
    for step in (1, 2):
        trackers.log_step(
            StepReport(step, 2, {"reward": 0.25 * step}, reward_histogram=reward_bins)
        )
    trackers.log_eval(EvalReport(2, {"eval/accuracy": 0.75}))
    trackers.close("succeeded")

    (log,) = wandb_logs(tmp_path / "run")
    assert wandb_exit_code(log) == 0  # once the log is complete
    assert wandb_metric([log], "eval/accuracy") == [(0, 0.5), (2, 0.75)]
    assert wandb_metric([log], "reward") == [(1, 0.25), (2, 0.5)]
    assert [values[10] for _, values in wandb_metric([log], "reward_histogram/values")] == [4, 4]


def test_each_trackers_run_ends_as_its_attempt_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    spec = JobSpec(logging={"report_to": ["mlflow", "wandb"]})
    outcomes = ("succeeded", "failed", "cancelled", "handed_back")
    for outcome in outcomes:
        trackers = Trackers(spec, tmp_path / outcome, run_name=outcome, mlflow_uri=uri)
        trackers.log_step(StepReport(1, 1, {"reward": 1.0}))
        trackers.close(outcome)

    assert {r.info.run_name: r.info.status for r in mlflow_runs(uri)} == {
        "succeeded": "FINISHED", "failed": "FAILED", "cancelled": "KILLED",
        "handed_back": "RUNNING",  # its next attempt reopens it
    }  # fmt: skip
    exit_codes = {}
    for outcome in outcomes:
        (log,) = wandb_logs(tmp_path / outcome)
        exit_codes[outcome] = wandb_exit_code(log)
    assert exit_codes == {"succeeded": 0, "failed": 1, "cancelled": 130, "handed_back": 143}


def test_a_later_attempt_reopens_the_trackers_runs_and_sends_no_step_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempt 1 sends eval 0 and steps 1-3, then fails; attempt 2 resumes from a checkpoint
    at step 2, so re-does step 3 (other values) and goes on to step 4."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    spec = JobSpec(logging={"report_to": ["tensorboard", "mlflow", "wandb"]})
    first = Trackers(spec, tmp_path / "run", run_name="run", mlflow_uri=uri)
    first.log_eval(EvalReport(0, {"eval/accuracy": 0.5}))
    for step in (1, 2, 3):
        first.log_step(StepReport(step, 1, {"reward": float(step)}))
    first.close("failed")
    second = Trackers(spec, tmp_path / "run", run_name="run", mlflow_uri=uri)
    for step in (3, 4):
        second.log_step(StepReport(step, 1, {"reward": 10.0 * step}))
    second.log_eval(EvalReport(4, {"eval/accuracy": 0.75}))
    second.close("succeeded")

    (run,) = mlflow_runs(uri)
    assert run.info.status == "FINISHED"
    assert mlflow_history(uri, run, "reward") == [(1, 1), (2, 2), (3, 3), (4, 40)]
    logs = wandb_logs(tmp_path / "run")
    assert len(logs) == 2 and len({log.name for log in logs}) == 1  # one W&B run id
    assert [wandb_exit_code(log) for log in logs] == [1, 0]
    assert wandb_metric(logs, "reward") == [(1, 1), (2, 2), (3, 3), (4, 40)]
    assert wandb_metric(logs, "eval/accuracy") == [(0, 0.5), (4, 0.75)]
    board = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    board.Reload()  # the second attempt's purge at step 3 hides the first's step 3
    rewards = [(s.step, s.value) for s in board.Scalars("reward")]
    assert rewards == [(1, 1), (2, 2), (3, 30), (4, 40)]
    assert [s.step for s in board.Scalars("eval/accuracy")] == [0, 4]


def test_a_step_mlflow_took_from_an_attempt_killed_before_saying_so_is_not_sent_twice(
    tmp_path: Path,
) -> None:
    """A worker SIGKILLed between MLflow's write of step 3 and trackers.json's (which still
    says step 2): the next attempt re-does step 3 and must not append a second value."""
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    spec = JobSpec(logging={"report_to": ["mlflow"]})
    first = Trackers(spec, tmp_path / "run", run_name="run", mlflow_uri=uri)
    for step in (1, 2):
        first.log_step(StepReport(step, 1, {"reward": float(step)}))
    assert first.mlflow is not None
    first.mlflow.log({"reward": 3.0}, 3)  # what log_step(3) had sent when the kill came
    second = Trackers(spec, tmp_path / "run", run_name="run", mlflow_uri=uri)
    for step in (3, 4):
        second.log_step(StepReport(step, 1, {"reward": 10.0 * step}))
    second.close("succeeded")
    (run,) = mlflow_runs(uri)
    assert mlflow_history(uri, run, "reward") == [(1, 1), (2, 2), (3, 3), (4, 40)]


def test_a_step_half_written_to_a_file_store_by_a_killed_attempt_is_completed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file store writes a batch one metric at a time: a worker SIGKILLed while writing
    step 3 leaves a prefix of its batch (here `loss` without `reward`, which is written
    last). The next attempt re-does step 3 and sends what is missing, nothing twice."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    spec = JobSpec(logging={"report_to": ["mlflow"]})
    first = Trackers(spec, tmp_path / "run", run_name="run", mlflow_uri=uri)
    for step in (1, 2):
        first.log_step(StepReport(step, 1, {"reward": float(step), "loss": -float(step)}))
    assert first.mlflow is not None
    batch = first.mlflow.batch({"reward": 3.0, "time/step": 0.5, "loss": -3.0}, 3)
    assert [m.key for m in batch] == ["time.step", "loss", "reward"]  # the marker last
    first.mlflow.client.log_batch(first.mlflow.run_id, metrics=batch[:2])  # then the kill
    second = Trackers(spec, tmp_path / "run", run_name="run", mlflow_uri=uri)
    for step in (3, 4):
        scalars = {"reward": 10.0 * step, "time/step": 0.25, "loss": -10.0 * step}
        second.log_step(StepReport(step, 1, scalars))
    second.close("succeeded")
    (run,) = mlflow_runs(uri)
    assert mlflow_history(uri, run, "reward") == [(1, 1), (2, 2), (3, 30), (4, 40)]
    assert mlflow_history(uri, run, "loss") == [(1, -1), (2, -2), (3, -3), (4, -40)]
    assert mlflow_history(uri, run, "time.step") == [(3, 0.5), (4, 0.25)]


def test_no_tracker_writes_nothing(tmp_path: Path) -> None:
    trackers = Trackers(JobSpec(), tmp_path)
    trackers.log_step(StepReport(1, 1, {"reward": 1.0}))
    trackers.close("succeeded")
    assert not (tmp_path / "tensorboard").exists()
    assert not (tmp_path / "mlflow.db").exists()
    assert not (tmp_path / "wandb").exists()


def test_a_missing_tracker_package_is_named_at_submit(monkeypatch: pytest.MonkeyPatch) -> None:
    check_trackers(SPEC)  # installed: accepted
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # what an uninstalled package looks like
    with pytest.raises(ApiError) as refused:
        check_trackers(SPEC)
    assert refused.value.status == 422
    assert "'tensorboard' package" in str(refused.value)
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(ApiError, match="'mlflow' package"):
        check_trackers(JobSpec(logging={"report_to": ["mlflow"]}))
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ApiError, match="'wandb' package"):
        check_trackers(JobSpec(logging={"report_to": ["wandb"]}))
    with pytest.raises(ValueError, match="report_to"):
        JobSpec(logging={"report_to": ["neptune"]})
