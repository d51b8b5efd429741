"""The embedded store's wake-ups (app/store/local_wakeup.py) reach a listener whatever the
depth of the data directory: a socket's path holds ~100 bytes, and a deeper data directory
(a test's temporary folder under pytest-xdist was one) once left its streams polling."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.settings import get_settings
from app.store import local_wakeup


def test_a_data_directory_too_deep_for_a_socket_still_gets_wake_ups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    monkeypatch.setenv("GRPO_DATA_DIR", str(deep))
    get_settings.cache_clear()
    heard: list[str] = []
    loop = asyncio.new_event_loop()
    listener = local_wakeup.LocalListener(heard.append)
    try:
        directory = local_wakeup.wakeup_dir()
        assert not directory.is_relative_to(deep)
        assert directory == local_wakeup.wakeup_dir()  # every process of the service agrees
        assert listener.start(loop)
        assert directory.stat().st_mode & 0o777 == 0o700  # this user's own
        local_wakeup.publish_local(["run-1"])
        for _ in range(200):  # the datagram is read when the loop runs: at once, or a hang
            loop.run_until_complete(asyncio.sleep(0.05))
            if heard:
                break
        assert heard == ["run-1"]
    finally:
        listener.close()
        loop.close()
        get_settings.cache_clear()
