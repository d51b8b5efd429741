"""Batched inserts: one round trip per table. PostgreSQL gets COPY, the fastest path in."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import JSON, insert
from sqlalchemy.orm import Session

from app.store.models import Base


def bulk_insert(session: Session, model: type[Base], rows: list[dict[str, Any]]) -> None:
    """Insert many rows of one table in one statement (COPY on PostgreSQL)."""
    if not rows:
        return
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        connection.execute(insert(model.__table__), rows)  # type: ignore[arg-type]
        return
    table = model.__table__
    columns = list(rows[0])
    is_json = [isinstance(table.c[name].type, JSON) for name in columns]
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    with cursor.copy(f'COPY "{table.name}" ({", ".join(columns)}) FROM STDIN') as copy:  # type: ignore[attr-defined]
        for row in rows:
            copy.write_row(
                [
                    json.dumps(row[c]) if j and row[c] is not None else row[c]
                    for c, j in zip(columns, is_json, strict=True)
                ]
            )
