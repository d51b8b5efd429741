"""Uploaded prompt sets: a row per dataset; the JSONL file lives in the datasets folder."""

from __future__ import annotations

from sqlalchemy import select

from app.store.db import session_scope
from app.store.models import Dataset


def add_dataset(dataset: Dataset) -> Dataset:
    with session_scope() as session:
        session.add(dataset)
    return dataset


def get_dataset(dataset_id: str) -> Dataset | None:
    with session_scope() as session:
        return session.get(Dataset, dataset_id)


def list_datasets() -> list[Dataset]:
    with session_scope() as session:
        return list(session.scalars(select(Dataset).order_by(Dataset.created_at.desc())))
