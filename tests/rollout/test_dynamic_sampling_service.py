"""Dynamic sampling through the service on the demo spec: the stored trained groups have
signal, the dropped ones are stored apart under the `dropped` filter and counted."""

from __future__ import annotations

from app.api.routes.presets import DEMO_SPEC
from tests.stack import Stack
from tests.worker.test_run_lifecycle import wait_for_final


def test_demo_with_dynamic_sampling_stores_groups_with_signal_and_counts_the_dropped(
    stack: Stack,
) -> None:
    spec = DEMO_SPEC.model_dump(mode="json") | {
        "max_steps": 3,
        "save_steps": 0,
        "dynamic_sampling": {"enabled": True, "max_rounds": 3},
        "resources": {"queue": stack.queue},
    }
    with stack.client() as client:
        response = client.post("/api/runs", json=spec)
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        run = wait_for_final(client, run_id)
        assert run["status"] == "succeeded", f"{run['error']}\n{stack.logs()}"
        metrics = client.get(f"/api/runs/{run_id}/metrics").json()["items"]
        assert [m["step"] for m in metrics] == [1, 2, 3]
        total_dropped = 0
        for row in metrics:
            step, scalars = row["step"], row["metrics"]
            base = f"/api/runs/{run_id}/steps/{step}/groups"
            trained = client.get(base).json()["items"]
            dropped = client.get(base, params={"filter": "dropped"}).json()["items"]
            with_signal = sum(g["reward_std"] > 0 for g in trained)
            assert with_signal >= 0.95 * len(trained) and len(trained) == 32
            assert not any(g["is_dropped"] for g in trained)
            assert all(g["is_dropped"] and g["reward_std"] == 0 for g in dropped)
            assert scalars["dynamic_sampling/dropped_groups"] == len(dropped)
            assert scalars["dynamic_sampling/rounds"] >= 2  # 38% of the demo's groups are flat
            total_dropped += len(dropped)
        assert total_dropped > 0
        mixed_only = client.get(
            f"/api/runs/{run_id}/steps/1/groups", params={"filter": "zero_std"}
        ).json()["items"]
        assert not any(g["is_dropped"] for g in mixed_only)
