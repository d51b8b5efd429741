"""Parquet uploads in the test process (TestClient over the real app and store): checked a
record batch at a time, so a 1 M-row file grows the API's memory by less than 50 MB; a bad
row is named; a system prompt on records with their own system turn is a 422 naming it."""

from __future__ import annotations

import gc
import io
import threading
from collections.abc import Iterator

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import get_settings
from tests.store_fixture import store

__all__ = ["store"]
PARQUET = {"content-type": "application/vnd.apache.parquet"}
ROWS = 1_000_000
MAX_GROWTH_MB = 50


@pytest.fixture
def api(store: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setenv("GRPO_MAX_DATASET_LINES", str(ROWS))
    get_settings.cache_clear()
    with TestClient(create_app(), base_url="http://localhost") as client:
        yield client


def parquet_bytes(rows: list[dict[str, object]] | pa.Table, row_group_size: int = 65536) -> bytes:
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows)
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue()


def million_rows() -> bytes:
    """ROWS records written 65,536 at a time: pyarrow's pool never holds the whole table,
    so memory it keeps for reuse cannot hide the upload's own growth."""
    sink = io.BytesIO()
    schema = pa.schema([("prompt", pa.string()), ("answer", pa.string())])
    with pq.ParquetWriter(sink, schema) as writer:
        for start in range(0, ROWS, 65536):
            part = range(start, min(ROWS, start + 65536))
            prompts = [f"What is {i} + {i % 97}?" for i in part]
            writer.write_table(
                pa.table({"prompt": prompts, "answer": [str(i + i % 97) for i in part]})
            )
    return sink.getvalue()


class PeakRss:
    """The highest resident set size of this process while it runs, sampled every 5 ms."""

    def __init__(self) -> None:
        self.process, self.peak = psutil.Process(), 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.005):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_million_row_parquet_upload_grows_api_memory_by_less_than_50_mb(api: TestClient) -> None:
    body = million_rows()
    gc.collect()
    api.get("/api/datasets")  # the routes' first-call costs before the baseline
    baseline = psutil.Process().memory_info().rss
    assert pa.total_allocated_bytes() < 2**20  # nothing of the writer's left in pyarrow's pool
    with PeakRss() as rss:
        uploaded = api.post("/api/datasets", params={"name": "big"}, content=body, headers=PARQUET)
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["num_records"] == ROWS
    growth_mb = (rss.peak - baseline) / 2**20
    print(f"1M-row parquet ({len(body) / 2**20:.1f} MB): API RSS growth {growth_mb:.1f} MB")
    assert growth_mb < MAX_GROWTH_MB


def test_a_chat_parquet_upload_keeps_its_columns_and_a_bad_row_is_named(api: TestClient) -> None:
    rows = [
        {"prompt": [{"role": "user", "content": f"{i}+1="}], "solution": str(i + 1)}
        for i in range(3)
    ]
    params = {"name": "chat", "answer_field": "solution"}
    uploaded = api.post(
        "/api/datasets", params=params, content=parquet_bytes(rows), headers=PARQUET
    )
    assert uploaded.status_code == 201, uploaded.text
    assert (uploaded.json()["num_records"], uploaded.json()["fields"]) == (
        3,
        ["prompt", "solution"],
    )
    bad = [*rows, {"prompt": [{"role": "robot", "content": "x"}], "solution": "1"}]
    refused = api.post("/api/datasets", params=params, content=parquet_bytes(bad), headers=PARQUET)
    assert refused.status_code == 422 and "row 4" in refused.text and "role" in refused.text
    nul = [{"prompt": "1+1=", "solution": "2"}] * 3 + [{"prompt": "a\x00b", "solution": "1"}]
    refused = api.post("/api/datasets", params=params, content=parquet_bytes(nul), headers=PARQUET)
    assert refused.status_code == 422 and "row 4: NUL" in refused.text
    truncated = api.post(
        "/api/datasets", params=params, content=b"PAR1 not really", headers=PARQUET
    )
    assert truncated.status_code == 422 and "parquet" in truncated.text

    spec = {"name": "sys", "model": "builtin:tiny", "rewards": [{"name": "format"}]}
    data = {
        "source": uploaded.json()["source"],
        "answer_field": "solution",
        "system_prompt": "Be brief.",
    }
    assert api.post("/api/runs", json={**spec, "data": data}).status_code == 201
    with_system = [{"prompt": [{"role": "system", "content": "own"}], "solution": "1"}, *rows]
    own = api.post(
        "/api/datasets", params=params, content=parquet_bytes(with_system), headers=PARQUET
    )
    refused_spec = api.post(
        "/api/runs", json={**spec, "data": {**data, "source": own.json()["source"]}}
    )
    assert refused_spec.status_code == 422, refused_spec.text
    field = refused_spec.json()["error"]["fields"][0]
    assert field["loc"] == "data.system_prompt" and "row 1 already has one" in field["message"]
