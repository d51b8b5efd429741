"""`grpo export` against the real service: a trained run's final checkpoint arrives in a
directory that AutoModelForCausalLM and AutoTokenizer load, with the trained weights, and a
cut download resumes where it stopped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.integration.conftest import tiny_spec
from tests.integration.test_run_lifecycle import wait_for_final
from tests.stack import Stack

GRPO = str(Path(sys.executable).parent / "grpo")


def grpo(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GRPO_URL": stack.url}
    return subprocess.run([GRPO, *args], env=env, capture_output=True, text=True, timeout=300)


def test_export_downloads_the_final_model_that_transformers_loads(
    embedded_stack: Stack, tmp_path: Path
) -> None:
    with embedded_stack.client() as client:
        spec = tiny_spec(embedded_stack, name="export", max_steps=3, save_steps=2)
        run_id = client.post("/api/runs", json=spec).json()["id"]
        assert wait_for_final(client, run_id)["status"] == "succeeded"
        listed = client.get(f"/api/runs/{run_id}/checkpoints").json()["items"]
        assert [(c["step"], c["is_final"]) for c in listed] == [(2, False), (3, True)]
        archive = client.get(f"/api/runs/{run_id}/checkpoints/latest/download").content

    out = tmp_path / "model"
    out.mkdir()
    (out / f".{run_id}-latest.tar.gz.part").write_bytes(archive[: len(archive) // 2])
    exported = grpo(embedded_stack, "export", run_id, str(out))
    assert exported.returncode == 0, exported.stderr
    assert f"{run_id}-step-000003.tar.gz" in exported.stdout
    assert not list(out.glob(".*.part"))

    model = AutoModelForCausalLM.from_pretrained(out)
    AutoTokenizer.from_pretrained(out)
    saved = embedded_stack.data_dir / "runs" / run_id / "checkpoints" / "step-000003" / "model"
    trained = load_file(str(saved / "model.safetensors"))
    for name, tensor in trained.items():
        torch.testing.assert_close(model.state_dict()[name], tensor, rtol=0, atol=0)

    missing = grpo(embedded_stack, "export", run_id, str(tmp_path / "x"), "--step", "1")
    assert missing.returncode == 2 and "no checkpoint at step 1" in missing.stderr
    assert (
        httpx.get(f"{embedded_stack.url}/api/runs/{run_id}/checkpoints/9/download").status_code
        == 404
    )
