"""The server-mode fields of a spec (grpo/spec/vllm.py, TRL's names): the address a run
reaches, what is refused at submission."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from grpo.spec import JobSpec


def test_the_server_is_the_base_url_or_host_and_port() -> None:
    assert JobSpec(use_vllm=True, vllm_mode="server").vllm_server_url == "http://0.0.0.0:8000"
    spec = JobSpec(use_vllm=True, vllm_mode="server", vllm_server_host="10.1.2.3",
                   vllm_server_port=8123)  # fmt: skip
    assert spec.vllm_server_url == "http://10.1.2.3:8123"
    spec = JobSpec(use_vllm=True, vllm_mode="server", vllm_server_host="10.1.2.3",
                   vllm_server_base_url="https://gen.example:9000/")  # fmt: skip
    assert spec.vllm_server_url == "https://gen.example:9000"  # the base URL wins, no slash


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"vllm_server_base_url": "gen.example:9000"}, "must start with http://"),
        ({"vllm_server_port": 0}, "greater than or equal to 1"),
        ({"vllm_server_timeout": 0}, "greater than 0"),
        ({"resources": {"num_processes": 2}}, "num_processes > 1 is not supported yet"),
    ],
)
def test_what_server_mode_refuses(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        JobSpec.model_validate({"use_vllm": True, "vllm_mode": "server", **fields})


def test_colocate_stays_the_default_and_takes_ranks() -> None:
    spec = JobSpec(use_vllm=True, resources={"num_processes": 2})  # type: ignore[arg-type]
    assert spec.vllm_mode == "colocate"
