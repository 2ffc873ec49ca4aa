"""What ``afi db copy`` says of a table whatever the engine: its key, and writing a batch with upserts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from afi.storage.database import Connection

__all__ = ["VECTOR_COLUMN", "TableCopy", "upsert"]

VECTOR_COLUMN = "embedding"  # the only binary column that differs between the engines (file bytes do not)


@dataclass(frozen=True)
class TableCopy:
    """One table: its name and the columns of its key, in the order rows are copied and compared."""

    name: str
    key: tuple[str, ...]
    replace: bool = False  # a row the destination already made for itself (a trigger's counter) is overwritten


def upsert(conn: Connection, spec: TableCopy, columns: list[str], rows: list[tuple[Any, ...]],
           convert: Callable[[Any, str], Any]) -> None:  # fmt: skip
    """Insert the rows (each value through ``convert(value, column)``), a row already there kept, or
    overwritten for a ``replace`` table."""
    marks = ", ".join("?" * len(columns))
    if spec.replace:
        sets = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in spec.key)
        conflict = f"ON CONFLICT ({', '.join(spec.key)}) DO UPDATE SET {sets}"
    else:  # SQLite names no implicit rowid as a conflict target: there any conflict is the row itself
        conflict = "ON CONFLICT DO NOTHING"
    sql = f"INSERT INTO {spec.name} ({', '.join(columns)}) VALUES ({marks}) {conflict}"
    conn.executemany(sql, [tuple(convert(v, c) for v, c in zip(row, columns, strict=True)) for row in rows])
