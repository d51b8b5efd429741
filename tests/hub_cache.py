"""A dataset saved in the local `datasets` cache exactly where `load_dataset("org/name",
config, split=...)` leaves a hub dataset it downloaded (HF_DATASETS_CACHE/org___name/
<config>/0.0.0/<revision>/), built here from local parquet files: nothing is downloaded."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

REVISION = "0" * 40


def save_hub_dataset(
    cache: Path, repo: str, splits_by_config: dict[str, dict[str, list[dict[str, Any]]]]
) -> None:
    """Save `{config: {split: rows}}` as the hub dataset `repo` in the datasets cache `cache`."""
    from datasets.packaged_modules.parquet.parquet import Parquet

    org, name = repo.split("/")
    for config, splits in splits_by_config.items():
        source = cache / ".source" / config
        source.mkdir(parents=True, exist_ok=True)
        files = {}
        for split, rows in splits.items():
            files[split] = str(source / f"{split}.parquet")
            pq.write_table(pa.Table.from_pylist(rows), files[split])
        builder = Parquet(
            cache_dir=str(cache / ".build"), dataset_name=name, config_name=config, data_files=files
        )
        builder.download_and_prepare()
        target = cache / f"{org}___{name}" / config / "0.0.0" / REVISION
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(builder.cache_dir, target)
    shutil.rmtree(cache / ".build")
    shutil.rmtree(cache / ".source")
