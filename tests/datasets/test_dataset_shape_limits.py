"""Dataset uploads bounded by shape as well as bytes, in the test process (TestClient over the
real app and store): a 100,000-column parquet file, a small dictionary-encoded file that
expands to about 1 GB and deep nesting are refused with the setting they exceed, the
bombs without the API's memory growing past 150 MB; JSONL lines are bounded alike; a normal
upload is still accepted; the datasets list names at most 32 fields a dataset."""

from __future__ import annotations

import gc
import io
import json
from collections.abc import Iterator

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import get_settings
from tests.datasets.test_dataset_uploads import PeakRss
from tests.store_fixture import store

__all__ = ["store"]
PARQUET = {"content-type": "application/vnd.apache.parquet"}
JSONL = {"content-type": "application/x-ndjson"}
MAX_GROWTH_MB = 150


@pytest.fixture
def api(store: str) -> Iterator[TestClient]:
    get_settings.cache_clear()
    with TestClient(create_app(), base_url="http://localhost") as client:
        client.get("/api/datasets")  # the routes' first-call costs before any baseline
        yield client


def to_parquet(table: pa.Table, **options: object) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def dictionary_bomb(value_bytes: int, rows: int) -> bytes:
    """One `value_bytes` string stored once, in a dictionary page, for every one of `rows`."""
    indices = pa.array([0] * rows, pa.int32())
    column = pa.DictionaryArray.from_arrays(indices, pa.array(["x" * value_bytes]))
    return to_parquet(pa.table({"prompt": column, "answer": ["4"] * rows}), compression="zstd")


def upload(api: TestClient, body: bytes, headers: dict[str, str], **params: str) -> tuple[int, str]:
    response = api.post(
        "/api/datasets", params={"name": "d", **params}, content=body, headers=headers
    )
    return response.status_code, response.text


def growth_mb(api: TestClient, body: bytes) -> tuple[int, str, float]:
    """The upload's answer and how far the process's RSS rose above its own baseline."""
    gc.collect()
    baseline = psutil.Process().memory_info().rss
    with PeakRss() as rss:
        status, text = upload(api, body, PARQUET)
    return status, text, (rss.peak - baseline) / 2**20


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_100000_column_parquet_file_is_refused_before_its_footer_is_parsed(
    api: TestClient,
) -> None:
    wide = to_parquet(pa.table({f"c{i}": pa.array([1], pa.int8()) for i in range(100_000)}))
    status, text, grown = growth_mb(api, wide)
    print(f"100,000 columns ({len(wide) / 2**20:.1f} MB): API RSS growth {grown:.1f} MB")
    assert status == 413 and "GRPO_MAX_DATASET_PARQUET_FOOTER_BYTES" in text, text
    assert "footer" in text and "4000000" in text
    assert grown < MAX_GROWTH_MB

    columns = {"prompt": ["2+2="], **{f"c{i}": [1] for i in range(1_000)}}
    status, text = upload(api, to_parquet(pa.table(columns)), PARQUET)
    assert status == 422 and "1001 columns" in text and "GRPO_MAX_DATASET_COLUMNS" in text


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_a_small_dictionary_encoded_file_that_expands_to_1_gb_is_refused_in_bounded_memory(
    api: TestClient,
) -> None:
    many_rows = dictionary_bomb(100_000, 10_000)  # 100 KB a row, each under the record limit
    status, text, grown = growth_mb(api, many_rows)
    print(f"1 GB over 10,000 rows ({len(many_rows)} bytes): API RSS growth {grown:.1f} MB")
    assert status == 413 and "GRPO_MAX_DATASET_DECODED_BYTES" in text, text
    assert "512000000" in text
    assert grown < MAX_GROWTH_MB

    large_value = dictionary_bomb(2_000_000, 500)  # 2 MB a row
    status, text, grown = growth_mb(api, large_value)
    print(f"1 GB over 500 rows ({len(large_value)} bytes): API RSS growth {grown:.1f} MB")
    assert status == 413 and "row 1 decodes to 2000" in text, text
    assert "GRPO_MAX_DATASET_RECORD_BYTES" in text
    assert grown < MAX_GROWTH_MB
    assert api.get("/api/datasets").json()["items"] == []


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
def test_deep_nesting_and_long_or_wide_jsonl_records_are_refused(api: TestClient) -> None:
    deep_type: pa.DataType = pa.string()
    deep_value: object = "x"
    for _ in range(17):
        deep_type, deep_value = pa.list_(deep_type), [deep_value]
    table = pa.table({"prompt": ["2+2="], "deep": pa.array([deep_value], deep_type)})
    status, text = upload(api, to_parquet(table), PARQUET, answer_field="")
    assert status == 422 and "column 'deep' nests 17 levels" in text, text
    assert "GRPO_MAX_DATASET_NESTING" in text

    line = {"prompt": "2+2=", "answer": "4", "deep": deep_value}
    status, text = upload(api, json.dumps(line).encode() + b"\n", JSONL)
    assert status == 422 and "line 1: field 'deep' nests 17 levels" in text, text

    long_line = json.dumps({"prompt": "x" * 1_000_000, "answer": "4"}).encode()
    status, text = upload(api, b'{"prompt": "1+1=", "answer": "2"}\n' + long_line, JSONL)
    assert status == 413 and "line 2 is longer than 1000000 bytes" in text, text
    assert "GRPO_MAX_DATASET_RECORD_BYTES" in text

    wide = {"prompt": "2+2=", "answer": "4", **{f"k{i}": i for i in range(999)}}
    status, text = upload(api, json.dumps(wide).encode(), JSONL)
    assert status == 422 and "line 1: 1001 fields" in text and "GRPO_MAX_DATASET_COLUMNS" in text
    spread = b"".join(
        json.dumps({"prompt": "2+2=", "answer": "4", f"k{i}": i}).encode() + b"\n"
        for i in range(1_000)
    )
    status, text = upload(api, spread, JSONL)
    assert status == 422 and "line 999: the records so far have 1001 distinct fields" in text


def test_a_normal_upload_is_accepted_and_the_list_names_at_most_32_fields(
    api: TestClient,
) -> None:
    rows = [
        {"prompt": [{"role": "user", "content": f"{i}+1="}], "answer": str(i + 1)}
        | {f"f{j:03}": j for j in range(98)}
        for i in range(2_000)
    ]
    status, text = upload(api, to_parquet(pa.Table.from_pylist(rows), row_group_size=500), PARQUET)
    assert status == 201, text
    uploaded = json.loads(text)
    assert (uploaded["num_records"], uploaded["num_fields"], len(uploaded["fields"])) == (
        2_000,
        100,
        100,
    )
    jsonl = b"".join(json.dumps(r).encode() + b"\n" for r in rows[:10])
    status, text = upload(api, jsonl, JSONL)
    assert status == 201 and json.loads(text)["num_records"] == 10, text

    listed = api.get("/api/datasets").json()["items"]
    assert [(d["num_fields"], len(d["fields"])) for d in listed] == [(100, 32), (100, 32)]
    assert listed[0]["fields"] == sorted(rows[0])[:32]
