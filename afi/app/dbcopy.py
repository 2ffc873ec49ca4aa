"""``afi db copy``: a whole store from one engine to the other (SQLite → PostgreSQL and back).

The source is read while it may be written to, but the copy is of a store at rest: rows changed
behind the copy's position are not visited again, and the check at the end says so. Stop the
source's writers for the copy.

Every table the provider keeps is copied row by row in key order, in batches; each batch and a note
of how far it got commit in one transaction of the destination, so an interrupted copy started again
goes on after the last batch that committed. What an engine derives for itself is not copied but
made again there: the full-text and trigram indexes (triggers, generated columns), and the ledger's
message index (written with each batch of entries). At the end both stores are read again, table by
table in the same order, and compared by row count and a SHA-256 over every value: the copy is done
only when every table agrees.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from afi.errors import Conflict, InvalidPath
from afi.providers.memory.fabric.vector_bytes import unpack_vector
from afi.providers.memory.ledger.index import index_messages
from afi.storage.database import Connection, Database, is_postgres_url, open_database, store_label
from afi.storage.pg_vector_form import VectorForm

from .copy_rows import VECTOR_COLUMN, TableCopy
from .dbcopy_columns import columns_of, select_list, stored_columns, stored_rows
from .pg_copy import PgCopy
from .sqlite_copy import SqliteCopy

__all__ = ["NOT_COPIED", "TABLES", "CopyPlan", "TableCheck", "copy_store", "verify_copy"]

PROGRESS_TABLE = "afi_copy_progress"


TABLES: tuple[TableCopy, ...] = (
    TableCopy("meta", ("key",)),
    TableCopy("afi_keys", ("rowid",)),
    TableCopy("afi_ssh_keys", ("rowid",)),
    TableCopy("audit", ("seq",)),
    TableCopy("afi_receipts", ("principal", "space", "tool", "key")),
    TableCopy("notes", ("rowid",)),
    TableCopy("source_lineage", ("tenant_id", "resource_id", "thread_id", "entry_id")),
    TableCopy("working", ("tenant_id", "resource_id", "thread_id")),
    TableCopy("note_changes", ("seq",)),
    TableCopy("note_band_centres", ("scope",)),
    TableCopy("note_bands", ("scope", "code", "note_rowid")),
    TableCopy("note_bags", ("note_rowid",)),
    TableCopy("workspace_files", ("rowid",)),
    TableCopy("workspace_seq", ("space",), replace=True),
    TableCopy("ledger_sessions", ("key",)),
    TableCopy("ledger_entries", ("seq",)),
    TableCopy("snapshots", ("space", "name")),
    TableCopy("snapshot_drops", ("space", "name", "at", "created_at")),
    TableCopy("folder_ops", ("space", "path")),
    TableCopy("file_blobs", ("sha256",)),
    TableCopy("file_versions", ("id",)),
    TableCopy("oauth_clients", ("client_id",)),
    TableCopy("oauth_grants", ("id",)),
    TableCopy("oauth_tokens", ("sha256",)),
    TableCopy("sync_peers", ("space", "peer")),
)
# a store's own log of the vectors it filled in after their writes, which its readers of the notes in
# memory follow; a copy's readers start from its notes as copied
NOT_COPIED = frozenset({"vector_fills"})


@dataclass(frozen=True)
class TableCheck:
    """One table after a copy: rows and checksum on each side."""

    name: str
    source_rows: int
    destination_rows: int
    source_sha256: str
    destination_sha256: str

    @property
    def ok(self) -> bool:
        return self.source_rows == self.destination_rows and self.source_sha256 == self.destination_sha256


@dataclass
class CopyPlan:
    """A copy from ``source`` to ``destination`` (each a SQLite path or a PostgreSQL URL)."""

    source: str | Path
    destination: str | Path
    batch: int = 2000

    def open(self) -> tuple[Database, Database]:
        if _same_store(self.source, self.destination):
            raise InvalidPath("the source and the destination are the same store")
        if not is_postgres_url(self.source) and not Path(self.source).exists():
            raise InvalidPath(f"no store at {self.source}")
        return open_database(self.source), open_database(self.destination)


def _same_store(a: str | Path, b: str | Path) -> bool:
    if is_postgres_url(a) or is_postgres_url(b):
        return str(a) == str(b)
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def _shared_columns(src: Database, dst: Database, spec: TableCopy) -> list[str]:
    have, want = columns_of(src, spec.name), set(columns_of(dst, spec.name))
    columns = [c for c in have if c in want]
    for key in reversed(spec.key):  # a SQLite table's implicit rowid is named explicitly
        if key not in columns:
            columns.insert(0, key)
    return columns


def _canonical(value: Any, column: str = VECTOR_COLUMN) -> Any:
    """A value as the checksum sees it, the same on either engine (an embedding as its components)."""
    if hasattr(value, "to_numpy"):
        return value.to_numpy().astype(np.float32).tobytes().hex()
    if isinstance(value, bytes | memoryview) and column != VECTOR_COLUMN:
        return bytes(value).hex()
    if isinstance(value, bytes | memoryview):  # an older store's float32 row is kept at half precision there
        return unpack_vector(value).astype(np.float16).astype(np.float32).tobytes().hex()
    if isinstance(value, float):
        return repr(value)
    return value


def _rows_after(db: Database, spec: TableCopy, columns: list[str], after: list[Any] | None,
                limit: int | None) -> list[tuple[Any, ...]]:  # fmt: skip
    key = ", ".join(spec.key)
    sql = f"SELECT {select_list(db, spec.name, columns)} FROM {spec.name}"
    params: list[Any] = []
    if after is not None:
        sql += f" WHERE ({key}) > ({', '.join('?' * len(after))})"
        params = list(after)
    sql += f" ORDER BY {key}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    with db.read() as conn:
        return list(conn.execute(sql, params).fetchall())


def _count(db: Database, table: str) -> int:
    with db.read() as conn:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def _progress(dst: Database, source: str) -> dict[str, tuple[list[Any], int]]:
    with dst.transaction() as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {PROGRESS_TABLE} (source TEXT NOT NULL, tbl TEXT NOT NULL, "
            "last_key TEXT NOT NULL, copied INTEGER NOT NULL, PRIMARY KEY (source, tbl))"
        )
        rows = conn.execute(f"SELECT tbl, last_key, copied FROM {PROGRESS_TABLE} WHERE source = ?", (source,))
        return {str(t): (json.loads(k), int(n)) for t, k, n in rows.fetchall()}


def _check_empty(dst: Database, done: dict[str, tuple[list[Any], int]]) -> None:
    """Refuse a destination that already holds a store this copy did not start."""
    if done:
        return
    for table in ("notes", "ledger_entries", "workspace_files", "afi_keys", "audit"):
        if _count(dst, table):
            raise Conflict(
                f"the destination already holds a store ({table} has rows): copy into an empty one "
                "(a new database, or a file that does not exist yet)"
            )


def _copy_of(db: Database) -> SqliteCopy | PgCopy:
    """The store's side of a copy, for its engine."""
    sqlite: type[SqliteCopy | PgCopy] = SqliteCopy
    return db.engine.choose(sqlite=sqlite, postgresql=PgCopy)()


def _insert(conn: Connection, dst: Database, target: SqliteCopy | PgCopy, spec: TableCopy, columns: list[str],
            rows: list[tuple[Any, ...]], form: VectorForm) -> None:  # fmt: skip
    """Write a batch of rows as the destination keeps them (``columns`` in :func:`stored_columns`' names),
    and index the ledger's messages among them."""
    target.insert(conn, spec, columns, rows, form)
    if spec.name == "ledger_entries":
        at = {c: i for i, c in enumerate(columns)}
        messages = [(row[at["seq"]], f"s{row[at['session_key']]}", row[at["text"]]) for row in rows
                    if row[at["type"]] == "message"]  # fmt: skip
        index_messages(dst, conn, messages)


def copy_store(plan: CopyPlan, on_progress: Callable[[str, int, int], None] | None = None) -> dict[str, int]:
    """Copy every table of the plan's source into its destination, resuming a copy interrupted
    before; return how many rows each table holds in the destination after this run.

    ``on_progress(table, copied, total)`` is called after each batch.

    Raises:
        InvalidPath: no such source, or the source is the destination.
        Conflict: the destination holds a store this copy did not start.
    """
    src, dst = plan.open()
    source = store_label(plan.source)
    done = _progress(dst, source)
    _check_empty(dst, done)
    copied: dict[str, int] = {}
    target = _copy_of(dst)
    target.prepare(dst)
    form: VectorForm = "halfvec"
    for spec in TABLES:
        if spec.name == "notes":  # the copied meta names the embedder, and so its vectors' form
            form = target.vector_form(dst)
        columns = _shared_columns(src, dst, spec)
        total = _count(src, spec.name)
        after, count = done.get(spec.name, (None, 0))
        if on_progress:
            on_progress(spec.name, count, total)
        key_at = [columns.index(k) for k in spec.key]
        for rows in _batches(src, spec, columns, after=after, size=plan.batch):
            after = [rows[-1][i] for i in key_at]
            count += len(rows)
            with dst.transaction() as conn:
                stored = stored_rows(dst, spec.name, columns, rows)
                _insert(conn, dst, target, spec, stored_columns(dst, spec.name, columns), stored, form)
                conn.execute(
                    f"INSERT INTO {PROGRESS_TABLE} (source, tbl, last_key, copied) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (source, tbl) DO UPDATE SET last_key = excluded.last_key, copied = excluded.copied",
                    (source, spec.name, json.dumps(after), count),
                )
            if on_progress:
                on_progress(spec.name, count, total)
        copied[spec.name] = count
    if target.rebuilds_indexes and on_progress:
        on_progress("(indexes)", 0, 1)
    target.finish(dst, _copy_of(src).issued(src))
    if target.rebuilds_indexes and on_progress:
        on_progress("(indexes)", 1, 1)
    return copied


def _digest(db: Database, spec: TableCopy, columns: list[str]) -> tuple[int, str]:
    hasher = hashlib.sha256()
    rows = 0
    for batch in _batches(db, spec, columns):
        for row in batch:
            hasher.update(
                json.dumps([_canonical(v, c) for v, c in zip(row, columns, strict=True)], ensure_ascii=False).encode()
            )
            hasher.update(b"\n")
            rows += 1
    return rows, hasher.hexdigest()


def _batches(db: Database, spec: TableCopy, columns: list[str], *, after: list[Any] | None = None,
             size: int = 5000) -> Iterator[list[tuple[Any, ...]]]:  # fmt: skip
    """The table's rows in key order, a batch at a time, from after the key ``after`` (or the start)."""
    key_at = [columns.index(k) for k in spec.key]
    while True:
        rows = _rows_after(db, spec, columns, after, size)
        if not rows:
            return
        yield rows
        after = [rows[-1][i] for i in key_at]


def verify_copy(plan: CopyPlan, *, finish: bool = True) -> list[TableCheck]:
    """Compare every table of the source and the destination (rows and SHA-256 over the values both
    keep); with ``finish`` and every table equal, forget the copy's progress in the destination."""
    src, dst = plan.open()
    checks = []
    for spec in TABLES:
        columns = _shared_columns(src, dst, spec)
        rows_src, sha_src = _digest(src, spec, columns)
        rows_dst, sha_dst = _digest(dst, spec, columns)
        checks.append(TableCheck(spec.name, rows_src, rows_dst, sha_src, sha_dst))
    if finish and all(check.ok for check in checks):
        with dst.transaction() as conn:
            conn.execute(f"DROP TABLE IF EXISTS {PROGRESS_TABLE}")
    return checks
