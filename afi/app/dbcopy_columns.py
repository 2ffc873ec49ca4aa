"""The columns ``afi db copy`` reads and writes, named the same on both engines.

The engines keep one thing differently: a SQLite note stores its whole rendering (``rendered``), a
PostgreSQL note its front matter (``front``), the content completing it in SQL
(:mod:`afi.storage.pg_derived_notes`). A copy speaks of ``rendered`` on both sides: read from
PostgreSQL it is that SQL expression, written to PostgreSQL it becomes the front matter again. So the
checksums at the end compare the same text whichever way the copy went.
"""

from __future__ import annotations

from typing import Any

from afi.errors import Unsupported
from afi.storage.database import Database
from afi.storage.pg_derived_notes import RENDERED_SQL

__all__ = ["columns_of", "select_list", "stored_columns", "stored_rows"]

_NOTES = "notes"
_LOGICAL = "rendered"
_FRONT = "front"


def columns_of(db: Database, table: str) -> list[str]:
    """The table's stored columns as a copy names them (a SQLite rowid table's implicit ``rowid`` left
    out; generated columns, which the engine computes, left out; a PostgreSQL note's ``front`` named
    ``rendered``)."""
    with db.read() as conn:
        names = db.engine.table_columns(conn, table)
    return [_LOGICAL if table == _NOTES and name == _FRONT else name for name in names]


def _derived(db: Database, table: str, columns: list[str]) -> bool:
    return db.engine.note_keeps_front and table == _NOTES and _LOGICAL in columns


def select_list(db: Database, table: str, columns: list[str]) -> str:
    """What a SELECT of those columns says on that engine."""
    if not _derived(db, table, columns):
        return ", ".join(columns)
    return ", ".join(f"{RENDERED_SQL} AS {_LOGICAL}" if c == _LOGICAL else c for c in columns)


def stored_columns(db: Database, table: str, columns: list[str]) -> list[str]:
    """The columns an INSERT or COPY of those columns names on that engine."""
    if not _derived(db, table, columns):
        return columns
    return [_FRONT if c == _LOGICAL else c for c in columns]


def stored_rows(db: Database, table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows as that engine stores them: into PostgreSQL a note's rendering becomes its front matter
    (refused, naming the note, when the rendering is not its front matter followed by its content)."""
    if not _derived(db, table, columns):
        return rows
    at, content_at, id_at = columns.index(_LOGICAL), columns.index("content"), columns.index("id")
    out: list[tuple[Any, ...]] = []
    for row in rows:
        rendered, content = str(row[at]), str(row[content_at])
        body = content if content.endswith("\n") else content + "\n"
        if not rendered.endswith(body):
            raise Unsupported(
                f"note {row[id_at]} has a rendering that does not end with its content; a PostgreSQL store "
                "keeps only a note's front matter and adds the content back, so it cannot hold this note as "
                "it is (rewrite it through afi-memory in the source store, then copy again)"
            )
        out.append((*row[:at], rendered[: len(rendered) - len(body)], *row[at + 1 :]))
    return out
