"""Schemathesis against the live API's own OpenAPI document, on both stores: every check,
and it must find nothing (no 5xx; every status, content type and body it answers is one the
document declares). Settings and the few documented exceptions: tests/schemathesis/."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stack import ROOT, Stack, create_pg_database, drop_pg_database, running_stack

CONFIG = ROOT / "tests" / "schemathesis" / "schemathesis.toml"


@pytest.fixture(params=["postgres", "embedded"])
def bare_api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """The API alone: no worker (generated specs must not train) and the filesystem broker
    (generated queue names leave nothing behind in a shared Redis)."""
    data_dir = tmp_path_factory.mktemp(f"openapi-{request.param}")
    if request.param == "embedded":
        with running_stack(data_dir, with_worker=False) as stack:
            yield stack
        return
    url = create_pg_database()
    try:
        with running_stack(data_dir, database_url=url, with_worker=False) as stack:
            yield stack
    finally:
        drop_pg_database(url)


def test_the_api_answers_only_what_its_openapi_document_declares(bare_api: Stack) -> None:
    st = Path(sys.executable).parent / "st"
    result = subprocess.run(
        [
            str(st),
            "--config-file",
            str(CONFIG),
            "--no-color",
            "run",
            "--checks",
            "all",
            f"{bare_api.url}/openapi.json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-12000:] + result.stderr[-3000:]
