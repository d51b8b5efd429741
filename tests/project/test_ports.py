"""`make docs` and a second `make up` never want the same port (issue 44, item 8): the docs
site serves past every port `grpo up` suggests when 8000 is taken, and past every port the
README and the docs tell a user to start a service on."""

from __future__ import annotations

import re
from pathlib import Path

from app.cli import SUGGESTED_PORTS
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SERVICE_PORT = re.compile(r"(?:GRPO_PORT=|--port )(\d+)")


def docs_port() -> int:
    (port,) = re.findall(
        r"mkdocs serve --dev-addr 127\.0\.0\.1:(\d+)", (ROOT / "Makefile").read_text()
    )
    return int(port)


def test_make_docs_serves_past_the_ports_a_second_service_is_told_to_use() -> None:
    default = Settings.model_fields["port"].default
    suggested = range(default, default + 1 + SUGGESTED_PORTS)  # grpo up's, when 8000 is taken
    assert docs_port() not in suggested
    texts = [ROOT / "README.md", ROOT / "Makefile", *sorted((ROOT / "docs").rglob("*.md"))]
    told = {int(p) for path in texts for p in SERVICE_PORT.findall(path.read_text())}
    assert told and docs_port() not in told
    said = {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", (ROOT / "README.md").read_text())}
    assert docs_port() in said  # the README says where the docs are
