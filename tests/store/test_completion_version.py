"""Every stored completion carries the policy version that sampled it (issue 41 item 3):
the step's report has it, the store keeps it with the completion and the group's API
answers it; a sample stored before it was recorded answers null. The real app and store
in the test process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session

from app.main import create_app
from app.store import runs, steps
from app.store.models import Sample
from grpo.report import CompletionReport, GroupReport, StepReport
from grpo.spec import JobSpec
from tests.store_fixture import session, store

__all__ = ["session", "store"]


def completion(version: int) -> CompletionReport:
    return CompletionReport(text="4", num_tokens=1, is_truncated=False, rewards={"accuracy": 1.0},
                            reward=1.0, advantage=0.0, kl=0.0, policy_version=version,
                            sampler_logps=[-0.25 * version])  # fmt: skip


@pytest.fixture
def api(store: str) -> Iterator[TestClient]:
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


def test_a_completions_policy_version_is_stored_and_answered(
    api: TestClient, session: Session
) -> None:
    spec = JobSpec(model="builtin:tiny", max_steps=6, async_generation=True, max_staleness=2)
    run, _ = runs.create_run(session, spec, package_version="t")
    group = GroupReport(
        index=0, prompt_id="2+2", prompt="2+2=", answer="4", rewards=[1.0, 1.0],
        advantages=[0.0, 0.0], completions=[completion(3), completion(2)], passes=[True, True],
    )  # fmt: skip
    steps.save_step(session, run.id, StepReport(step=5, total_steps=6, scalars={}, groups=[group]))
    answered = api.get(f"/api/runs/{run.id}/steps/5/groups/0")
    assert answered.status_code == 200, answered.text
    assert sorted(c["policy_version"] for c in answered.json()["completions"]) == [2, 3]
    # and its sampler's per-token log-probs
    assert sorted(c["sampler_logps"] for c in answered.json()["completions"]) == [[-0.75], [-0.5]]

    before = [
        {k: v for k, v in c.items() if k not in ("policy_version", "sampler_logps")}
        for c in answered.json()["completions"]
    ]  # a sample stored before the version was recorded
    session.execute(update(Sample).where(Sample.run_id == run.id).values(completions=before))
    session.commit()
    stored_before = api.get(f"/api/runs/{run.id}/steps/5/groups/0").json()["completions"]
    assert [c["policy_version"] for c in stored_before] == [None, None]
    assert [c["sampler_logps"] for c in stored_before] == [None, None]
