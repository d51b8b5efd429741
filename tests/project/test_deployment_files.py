"""The full-stack compose file is valid and wires every service to the same settings."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_compose_file_is_valid_for_docker_compose() -> None:
    assert shutil.which("docker-compose"), "Debian's docker-compose is needed (.ci/run installs it)"
    result = subprocess.run(
        ["docker-compose", "-f", "docker-compose.yml", "config", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_compose_has_the_full_stack_with_healthchecks_volumes_and_a_gpu_worker() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "api", "worker"} <= set(services)
    assert all("healthcheck" in s for s in services.values())
    assert set(compose["volumes"]) >= {"pgdata", "rundata"}
    devices = services["worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    for name in ("api", "worker"):
        env = services[name]["environment"]
        assert env["GRPO_DATABASE_URL"].startswith("postgresql") and env[
            "GRPO_BROKER_URL"
        ].startswith("redis")


def test_every_path_the_api_and_workers_share_is_on_a_shared_volume() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name in ("api", "worker"):
        service = compose["services"][name]
        mounts = {
            Path(v.split(":")[1])
            for v in service["volumes"]
            if v.split(":")[0] in compose["volumes"]
        }
        env = service["environment"]
        for setting in ("GRPO_DATA_DIR", "GRPO_CACHE_DIR", "HF_HOME"):
            path = Path(env[setting])
            assert any(path.is_relative_to(m) for m in mounts), f"{name}: {setting}={path}"


def test_compose_waits_for_a_stopping_worker_to_hand_its_run_back() -> None:
    from app.settings import Settings

    worker = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["worker"]
    grace = int(worker["stop_grace_period"].removesuffix("s"))
    assert grace >= Settings().stop_grace_seconds + 5  # the hand-back, then the exit


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make up" in quick_start and "make test" in quick_start
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("make test")
