"""The embedded broker (app/file_broker.py): a consumer polling the queue folder while another
process sends never reads a message before it is whole. With kombu's own filesystem
transport this test fails: the consumer takes a file the sender has created but not yet
written and raises JSONDecodeError (the Celery worker's "Unrecoverable error")."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
from pathlib import Path

import pytest

from app.file_broker import Transport
from app.queue import make_celery, prepare_broker
from app.settings import get_settings
from tests.stack import ROOT

SENDS = 3000
SENDER = """
import sys
from app.queue import celery_app
for i in range(int(sys.argv[1])):
    celery_app.send_task("grpo.race", args=[i], queue="race")
"""


def test_a_consumer_polling_beside_a_sender_gets_every_message_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    monkeypatch.setenv("GRPO_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    request.addfinalizer(get_settings.cache_clear)
    prepare_broker()  # the folders, as the API and the worker make them when they start
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env["GRPO_DATA_DIR"] = str(tmp_path)
    got: list[int] = []
    with make_celery(get_settings()).connection_for_read() as connection:
        assert isinstance(connection.transport, Transport)
        inbox = connection.SimpleQueue("race", no_ack=True)
        sender = subprocess.Popen([sys.executable, "-c", SENDER, str(SENDS)], cwd=ROOT, env=env)
        try:
            # No wait between polls, so that a file seen before it is written would be read.
            # Once the sender has exited, one more poll that finds nothing ends it.
            sender_done = False
            while True:
                try:
                    got.append(inbox.get_nowait().decode()[0][0])
                except queue.Empty:
                    if sender_done:
                        break
                    sender_done = sender.poll() is not None
        finally:
            sender.kill()
            sender.wait()
            inbox.close()
    assert sender.returncode == 0
    assert sorted(got) == list(range(SENDS))
    assert list((tmp_path / "broker" / "staging").iterdir()) == []  # nothing left half-sent
