"""`grpo datasets upload FILE` and `grpo datasets list`: data in without curl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo.client import GrpoClient


def upload(client: GrpoClient, args: Any) -> int:
    """Upload a JSONL file as it is (one record a line) and say how to name it in a spec."""
    path = Path(args.file)
    dataset = client.upload_dataset(
        path,
        name=args.name or path.stem,
        prompt_field=args.prompt_field,
        answer_field=args.answer_field,
    )
    print(
        f"dataset {dataset['id']} {dataset['name']!r}: {dataset['num_records']} records, "
        f"fields {', '.join(dataset['fields'])}"
    )
    fields = ""
    if args.prompt_field != "prompt" or args.answer_field != "answer":
        fields = f", prompt_field: {args.prompt_field}, answer_field: {args.answer_field}"
    print(f"use it in a spec as   data: {{source: {dataset['source']}{fields}}}")
    return 0


def list_datasets(client: GrpoClient) -> int:
    for d in client.datasets():
        print(
            f"{d['source']}  {d['num_records']:>7} records  {d['name']}  "
            f"(fields {', '.join(d['fields'])})"
        )
    return 0


def datasets(client: GrpoClient, args: Any) -> int:
    return upload(client, args) if args.action == "upload" else list_datasets(client)
