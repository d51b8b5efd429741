"""One run from every door (grpo/run/run.py): the same spec, with `report_to: [tensorboard]`
and a reward from a plain file in the plugin folder, trained by the service and by
`grpo train` (GRPO_PLUGIN_DIRS naming the service's folder), writes two TensorBoard runs
with the same scalar tags and values, step by step (timings aside), and the same
histograms. `from grpo import train` writes its trackers too, and a tracker whose package is
missing is refused before anything loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import grpo
from grpo.run.environment import RunEnvironment
from grpo.run.run import Run
from grpo.spec import JobSpec
from tests.fixtures.service import tiny_spec
from tests.stack import Stack
from tests.worker.test_run_lifecycle import wait_for_final

GRPO = str(Path(sys.executable).parent / "grpo")
PLUGIN = '''
def door_digits(completions, **kwargs):
    """TRL's signature: the share of digits in each completion."""
    return [sum(c.isdigit() for c in text) / max(1, len(text)) for text in completions]
'''
CLOCKED = ("time/", "tokens_per_second", "memory/")
"""Scalars that measure this machine's clock or memory, not the run."""
FP32_NOISE = 1e-5
"""How far the two doors' values may differ: a clean-clone run (ci20) saw step 1's entropy
4.590126991 from the service and 4.590126514 from `grpo train` (1e-7 relative, a float32
reduction in another order); a different sample or update is off by far more."""


def board(directory: Path) -> dict[str, Any]:
    """Every scalar's (step, value)s and every histogram's (step, bucket counts) by tag."""
    events = EventAccumulator(str(directory))
    events.Reload()
    tags = events.Tags()
    scalars = {t: [(s.step, s.value) for s in events.Scalars(t)] for t in tags["scalars"]}
    histograms = {
        t: [(h.step, list(h.histogram_value.bucket)) for h in events.Histograms(t)]
        for t in tags["histograms"]
    }
    return {"scalars": scalars, "histograms": histograms}


def test_grpo_train_writes_the_tensorboard_run_the_service_writes(
    embedded_stack: Stack, tmp_path: Path
) -> None:
    spec = tiny_spec(
        embedded_stack, name="doors", max_steps=2, save_steps=0,
        rewards=[
            {"name": "length", "max_length": 6, "cache_length": 4},
            {"name": "python", "function": "door_digits", "label": "digits"},
        ],
        logging={"report_to": ["tensorboard"]},
    )  # fmt: skip
    plugins = embedded_stack.data_dir / "plugins"
    plugins.mkdir(exist_ok=True)
    (plugins / "door_plugin.py").write_text(PLUGIN)
    try:
        with embedded_stack.client() as client:
            response = client.post("/api/runs", json=spec)
            assert response.status_code == 201, response.text
            run_id = response.json()["id"]
            assert wait_for_final(client, run_id)["status"] == "succeeded"
        (tmp_path / "spec.yaml").write_text(json.dumps(spec))  # JSON is YAML
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
        if "GRPO_CACHE_DIR" in os.environ:
            env["GRPO_CACHE_DIR"] = os.environ["GRPO_CACHE_DIR"]
        env["GRPO_PLUGIN_DIRS"] = str(plugins)
        trained = subprocess.run(
            [GRPO, "train", "spec.yaml", "--workdir", "run"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert trained.returncode == 0, trained.stderr
    finally:
        (plugins / "door_plugin.py").unlink()

    service = board(embedded_stack.data_dir / "runs" / run_id / "tensorboard")
    here = board(tmp_path / "run" / "tensorboard")
    assert set(here["scalars"]) == set(service["scalars"])
    assert "rewards/digits/mean" in here["scalars"]  # the plugin's reward, from the folder
    for tag, values in service["scalars"].items():
        if not tag.startswith(CLOCKED):  # the same run, to fp32 noise (two processes' kernels)
            ours, theirs = [v for _, v in here["scalars"][tag]], [v for _, v in values]
            assert ours == pytest.approx(theirs, rel=FP32_NOISE, abs=1e-6), tag
        assert [step for step, _ in here["scalars"][tag]] == [1, 2] == [s for s, _ in values]
    assert here["histograms"] == service["histograms"]
    assert len(set(here["scalars"]["reward"])) == 2  # not all-zero: the rewards vary


def test_the_python_api_writes_its_trackers_too(tmp_path: Path, grpo_cache_dir: Path) -> None:
    spec = {
        "model": "builtin:tiny", "max_steps": 1, "prompts_per_step": 2, "num_generations": 2,
        "max_completion_length": 4, "save_steps": 0, "logging": {"report_to": ["tensorboard"]},
    }  # fmt: skip
    trainer = grpo.train(spec, workdir=tmp_path / "run", cache_dir=grpo_cache_dir)
    written = board(tmp_path / "run" / "tensorboard")["scalars"]
    reward = trainer.reports[0].scalars["reward"]
    assert written["reward"] == [(1, pytest.approx(reward, rel=1e-6))]  # TensorBoard's float32


def test_a_tracker_without_its_package_is_refused_before_anything_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # what an uninstalled package looks like
    spec = JobSpec(model="builtin:tiny", logging={"report_to": ["tensorboard"]})
    run = Run(spec, RunEnvironment(workdir=tmp_path / "run", cache_dir=tmp_path / "cache"))
    with pytest.raises(ValueError, match=r"^logging.report_to: tensorboard needs the 'tens"):
        run.fit()
    assert not (tmp_path / "cache").exists()  # no model was built
