"""Read back what the trackers wrote, with each tracker's own reader where it has one: a
W&B run log (no reader ships with wandb-core's SDK: the LevelDB log format, below) and the
MLflow runs of a store."""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path
from typing import Any

from mlflow.entities import Run
from mlflow.tracking import MlflowClient
from wandb.proto import wandb_internal_pb2


def wandb_records(log: Path) -> list[Any]:
    """The wandb_internal_pb2.Records of a W&B run log (LevelDB's log format after a 7-byte
    file header: 32 KiB blocks of chunks (crc32, length, type), a record split over blocks as
    FIRST, MIDDLE..., LAST chunks; a block's tail under 7 bytes is padding)."""
    block = 32768
    data = log.read_bytes()
    assert data[:4] == b":W&B"
    records, at, chunks = [], 7, b""
    while at + 7 <= len(data):
        if block - at % block < 7:
            at += block - at % block
            continue
        length, kind = struct.unpack("<HB", data[at + 4 : at + 7])
        if at + 7 + length > len(data):  # still being written
            break
        chunks += data[at + 7 : at + 7 + length]
        at += 7 + length
        if kind in (1, 4):  # FULL, LAST
            records.append(wandb_internal_pb2.Record.FromString(chunks))
            chunks = b""
    return records


def wandb_history(log: Path) -> list[dict[str, Any]]:
    """The history rows of a W&B run log, keyed as logged."""
    return [
        {"/".join(i.nested_key) or i.key: json.loads(i.value_json) for i in r.history.item}
        for r in wandb_records(log)
        if r.WhichOneof("record_type") == "history"
    ]


def wandb_metric(logs: list[Path], key: str) -> list[tuple[int, Any]]:
    """A metric's (step, value)s, in the order logged over the attempts' logs (`step` is our
    step, each row's x-axis)."""
    return [(row["step"], row[key]) for log in logs for row in wandb_history(log) if key in row]


def wandb_exit_code(log: Path, timeout: float = 60) -> int:
    """The exit code a W&B run log ends with, once it does: wandb-core writes the log in its
    own process, and `finish()` returns before the last records are on disk."""
    deadline = time.monotonic() + timeout
    while True:
        records = wandb_records(log)
        exits = [r.exit.exit_code for r in records if r.WhichOneof("record_type") == "exit"]
        if exits:
            return int(exits[-1])
        assert time.monotonic() < deadline, f"{log} has no exit record after {timeout} s"
        time.sleep(0.1)


def wandb_logs(run_dir: Path) -> list[Path]:
    """The offline W&B run logs under a run's directory, one per attempt, oldest first."""
    return sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))


def mlflow_client(uri: str) -> MlflowClient:
    if uri.startswith("file:"):  # MLflow 3 opens a file store only when told it may
        os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    return MlflowClient(tracking_uri=uri)


def mlflow_runs(uri: str, name: str | None = None) -> list[Run]:
    """The runs of the experiment `grpo` in an MLflow store (those named `name`)."""
    client = mlflow_client(uri)
    experiment = client.get_experiment_by_name("grpo")
    assert experiment is not None
    named = f"attributes.run_name = '{name}'" if name else ""
    return list(client.search_runs([experiment.experiment_id], filter_string=named))


def mlflow_history(uri: str, run: Run, key: str) -> list[tuple[int, float]]:
    """A metric's (step, value)s, by step: a step logged twice shows twice."""
    history = mlflow_client(uri).get_metric_history(run.info.run_id, key)
    return sorted((m.step, m.value) for m in history)
