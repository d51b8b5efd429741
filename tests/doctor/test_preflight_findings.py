"""The reward preflight at a run's start (grpo/run/preflight.py) as the run doctor's
findings: a tiny run trained by the worker's job (worker.job.run_job: its rank in a process
of its own, the real store) whose reward pays for a tag alone gets a `reward_hole` finding
with the probe's sentence and, as its evidence, the probes' completions with every
function's score; the accuracy reward gets none; the findings outlive a new diagnosis of
the stored steps; the run's log says what was probed. `reward_preflight_records: 0` probes
nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.main import create_app
from app.store import db
from app.store.models import Diagnosis
from grpo.data.example import Example
from grpo.rewards.scoring import Rewarder
from grpo.rewards.trial_report import PreflightReport
from grpo.run.environment import RunEnvironment
from grpo.run.preflight import PREFIX, preflight_rewards
from grpo.run.run import Run
from grpo.run.sink import Sink
from grpo.spec import JobSpec
from tests.store_fixture import store
from worker.job import run_job

__all__ = ["store"]

REWARDS = [{"name": "accuracy"}, {"name": "regex", "pattern": "<answer>", "label": "tags"}]
SPEC: dict[str, Any] = {
    "name": "holey", "model": "builtin:tiny", "max_steps": 1, "prompts_per_step": 2,
    "num_generations": 2, "max_completion_length": 4, "save_steps": 0, "save_final": False,
    "rewards": REWARDS, "reward_preflight_records": 2,
}  # fmt: skip
HOLE = "reward_hole:rewards.1.format_wrong_answer@0"


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_runs_reward_hole_is_a_doctor_finding_with_its_probes(store: str) -> None:
    with TestClient(create_app(), base_url="http://localhost") as api:
        submitted = api.post("/api/runs", json=SPEC)
        assert submitted.status_code == 201, submitted.text
        run_id = submitted.json()["id"]
        run_job(run_id)
        run = api.get(f"/api/runs/{run_id}").json()
        assert run["status"] == "succeeded", run["error"]
        assert run["doctor"] == {"open": 1, "severity": "warning"}  # marked: its warnings
        items = api.get(f"/api/runs/{run_id}/diagnostics").json()["items"]
        found = {f["id"]: f for f in items if f["rule"].startswith("reward_")}
        # none on accuracy (checking the answer is all it claims); nothing in the spec asks
        # for brevity, so a correct completion as long as the limit earns the full total
        assert sorted(found) == [HOLE, "reward_hole:total.very_long@0"]
        hole = found[HOLE]
        # the total's hole earns nothing without the answer: said, not warned of
        assert found["reward_hole:total.very_long@0"]["severity"] == "info"
        assert (hole["rule"], hole["title"], hole["severity"], hole["status"]) == (
            "reward_hole", "Reward hole", "warning", "open")  # fmt: skip
        assert hole["message"] == (
            "format-only completions (the format around a wrong answer) score 1 on `tags` — the "
            "model can earn 50% of the total reward of a correct completion without solving "
            "anything"
        )
        assert hole["evidence"]["metric"] == "" and hole["evidence"]["facts"]["share"] == 0.5
        shown = hole["evidence"]["completions"]
        assert [c["note"] for c in shown] == [
            "probe correct, record 0", "probe format_wrong_answer, record 0",
            "probe correct, record 1", "probe format_wrong_answer, record 1",
        ]  # fmt: skip
        for c in shown:
            right = c["note"].startswith("probe correct")
            assert c["rewards"] == {"accuracy": 1.0 if right else 0.0, "tags": 1.0}
            assert c["reward"] == (2.0 if right else 1.0) and c["answer"]
            assert f"<answer>{c['answer']}</answer>" in c["text"] or not right
        logs = [line["message"] for line in api.get(f"/api/runs/{run_id}/logs").json()["items"]]
        assert "reward preflight: 2 records probed; 2 found" in logs
        assert f"reward preflight: {hole['message']}" in logs
        with db.session() as session:  # as if the rules changed: the stored steps read again
            session.execute(
                update(Diagnosis).where(Diagnosis.run_id == run_id).values(rules_version=0)
            )
        again = api.get(f"/api/runs/{run_id}/diagnostics").json()["items"]
        assert [f for f in again if f["id"] == HOLE] == [hole]


def test_no_records_asked_probes_nothing() -> None:
    spec = JobSpec.model_validate({**SPEC, "reward_preflight_records": 0})
    said: list[tuple[str, str]] = []
    examples = [Example(id="0", prompt="2+2=", answer="4")]
    rewarder = Rewarder(spec.rewards)
    assert preflight_rewards(spec, rewarder, examples, log=lambda *line: said.append(line)) is None
    assert said == []
    asked = JobSpec.model_validate(SPEC)
    report = preflight_rewards(asked, rewarder, examples, log=lambda *line: said.append(line))
    assert report is not None and report.records == 1 and len(report.probes) == 10
    assert [f.probe for f in report.findings] == ["format_wrong_answer", "very_long"]
    assert said[0] == ("info", "reward preflight: 1 record probed; 2 found")
    # each at the doctor's severity: the total's very long hole earns nothing without the
    # answer, so it is said, not warned of
    assert said[1:] == [
        ("warning" if f.probe == "format_wrong_answer" else "info", f"{PREFIX}: {f.message}")
        for f in report.findings
    ]


class Said(Sink):
    """The run's log lines and preflight reports, as a sink of the Run sees them."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.reports: list[PreflightReport] = []

    def add_log(self, level: str, message: str) -> None:
        self.lines.append(message)

    def log_preflight(self, report: PreflightReport) -> None:
        self.reports.append(report)


def test_the_preflight_runs_before_step_1_and_not_again_on_a_resumed_attempt(
    tmp_path: Path, grpo_cache_dir: Path
) -> None:
    spec = JobSpec.model_validate({**SPEC, "max_steps": 2, "save_steps": 1})
    env = RunEnvironment(workdir=tmp_path / "run", cache_dir=grpo_cache_dir)
    first, second = Said(), Said()
    Run(spec.model_copy(update={"max_steps": 1}), env, [first]).fit(resume=True)
    Run(spec, env, [second]).fit(resume=True)  # the checkpoint of step 1: a resume
    assert len(first.reports) == 1 and "reward preflight: 2 records probed; 2 found" in first.lines
    assert any(line.startswith("resumed from checkpoint at step 1") for line in second.lines)
    assert second.reports == [] and not any("reward preflight" in x for x in second.lines)
