"""The embedded default's broker transport: kombu's filesystem transport, with each message
written whole before it shows in the queue folder.

kombu's own transport creates a message's file in the queue folder and writes it after
(kombu issue #1551, open): a consumer polling that folder can take the file in between, read
nothing, and raise JSONDecodeError out of its consumer loop, which a Celery worker treats as
"Unrecoverable error" and exits. The suite hit it: an embedded stack's worker died the moment
the API queued a run, and the run waited on a queue nobody read. Here a message is written
to a file in a staging folder beside the queue folder and renamed into it (one rename on one
filesystem: a consumer finds the whole file or none). Only `_put` differs; app/queue.py names
this class as the Celery app's transport when the broker is `filesystem://`.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.json import dumps
from kombu.utils.objects import cached_property

TRANSPORT = "app.file_broker:Transport"
"""How Celery's `broker_transport` names it."""


class Channel(filesystem.Channel):
    @cached_property
    def staging_folder(self) -> Path:
        """Where a message is written before it is moved into the queue folder: `staging`
        beside it, on the same filesystem; `_put` makes it."""
        return Path(self.data_folder_out).parent / "staging"

    # kombu's filesystem transport names the argument `payload`, its base class `message`
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        # kombu's name: the time in ms sorts the folder in arrival order for `_get`.
        name = f"{int(round(time.monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        staged = self.staging_folder / name
        try:
            self.staging_folder.mkdir(parents=True, exist_ok=True)
            staged.write_bytes(dumps(payload).encode())  # type: ignore[no-untyped-call]
            os.replace(staged, Path(self.data_folder_out) / name)
        except OSError as exc:
            staged.unlink(missing_ok=True)
            raise ChannelError(f"Cannot add file {name!r} to the queue folder") from exc


class Transport(filesystem.Transport):
    Channel = Channel
