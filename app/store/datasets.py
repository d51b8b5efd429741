"""Uploaded prompt sets: a row per dataset; the JSONL file lives in the datasets folder."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.db import unit
from app.store.models import Dataset


@unit
def add_dataset(session: Session, dataset: Dataset) -> Dataset:
    session.add(dataset)
    return dataset


@unit
def get_dataset(session: Session, dataset_id: str) -> Dataset | None:
    return session.get(Dataset, dataset_id)


@unit
def list_datasets(session: Session) -> list[Dataset]:
    return list(session.scalars(select(Dataset).order_by(Dataset.created_at.desc())))
