"""A space's workspace file history in the store: content-addressed bytes and the versions naming them.

``file_blobs`` keeps each distinct content once (keyed by its SHA-256, shared by every version and
space holding it); ``file_versions`` says that from ``at`` on (UTC, milliseconds, as the notes'
times), ``path`` held the blob ``sha256``, or was absent when ``sha256`` is NULL (``op`` 'delete',
or 'move' away). Rows of one path are ordered by ``(at, id)``: the newest at or before an instant
is what the path held then.

A version of a file over ``max_blob_bytes`` (``AFI_HISTORY_MAX_FILE_SIZE``, 64 MiB by default), or of
a file with holes (:mod:`.digest`), keeps its size and digest but not its bytes: asking for them is
refused with a message that says so.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from afi import config
from afi.errors import InvalidPath, NotFound, TooLarge
from afi.storage.database import Database

from ..fabric.errors import MemoryValidationError
from ..fabric.fields import canonical_time
from .digest import SPARSE_HOLE_BYTES
from .file_index import INDEX_MAX_BYTES
from .quota import format_size

__all__ = ["FILE_OPS", "FileHistory", "FileVersion", "blob_text", "history_max_bytes"]

FILE_OPS = ("write", "delete", "move")
_COLUMNS = "id, space, path, sha256, size, at, op"


def history_max_bytes() -> int:
    """The largest file whose versions keep their bytes (``AFI_HISTORY_MAX_FILE_SIZE``; 64 MiB by default)."""
    return config.history_max_file_size()


@dataclass(frozen=True)
class FileVersion:
    """One row of ``file_versions``: from ``at`` on, ``path`` held ``sha256`` (absent when None)."""

    id: int
    space: str
    path: str
    sha256: str | None
    size: int
    at: str
    op: str

    @property
    def present(self) -> bool:
        return self.sha256 is not None


def _version(row: Any) -> FileVersion:
    id_, space, path, sha, size, at, op = row
    return FileVersion(int(id_), str(space), str(path), None if sha is None else str(sha), int(size), str(at), str(op))


def blob_text(data: bytes) -> str | None:
    """The text grep reads in a version's bytes (None for binary or oversized ones), as the file index does."""
    if len(data) > INDEX_MAX_BYTES or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _check_version(path: str, sha256: str | None, size: int, at: str, op: str) -> str:
    if not path or path.startswith("/") or "" in path.split("/"):
        raise InvalidPath(f"a file version names a workspace path such as notes/todo.txt, not {path!r}")
    if op not in FILE_OPS:
        raise InvalidPath(f"a file version's op is one of {', '.join(FILE_OPS)}, not {op!r}")
    if size < 0 or (sha256 is None and size != 0):
        raise InvalidPath(f"a file version's size must be 0 or more (0 when absent), not {size}")
    if sha256 is not None and (len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256)):
        raise InvalidPath(f"a file version's sha256 is 64 lowercase hex digits, not {sha256!r}")
    try:
        return canonical_time(at, "the version's time")
    except MemoryValidationError as err:
        raise InvalidPath(err.message) from None


def _after_latest(conn: Any, space: str, path: str, at: str) -> str:
    """``at``, or one millisecond later when the path's newest version has that very time: two writes
    of one path in one millisecond get distinct times in the order they were written, so the newest by
    time is the one on disk, here and on every store it is synced to. (A version recorded with an
    earlier time, as a file's bytes kept from before its first write are, keeps it.)"""
    row = conn.execute("SELECT MAX(at) FROM file_versions WHERE space = ? AND path = ?", (space, path)).fetchone()
    if row is None or row[0] is None or str(row[0]) != at:
        return at
    later = datetime.fromisoformat(at.replace("Z", "+00:00")) + timedelta(milliseconds=1)
    return later.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class FileHistory:
    """One space's file versions. Writers call it under the space's write lock (the provider's)."""

    def __init__(self, database: Database, space: str, *, max_blob_bytes: int | None = None) -> None:
        self._db = database
        self.database = database
        self.space = space
        self.max_blob_bytes = history_max_bytes() if max_blob_bytes is None else max_blob_bytes
        self._cache: dict[str, tuple[tuple[int, int], dict[str, FileVersion]]] = {}
        self._cache_lock = threading.Lock()

    # -- writes ----------------------------------------------------------------------------

    def record_write(self, path: str, data: bytes, at: str, *, op: str = "write") -> FileVersion:
        """Record that from ``at`` on ``path`` holds ``data`` (its bytes kept once, if not over the cap)."""
        sha = hashlib.sha256(data).hexdigest()
        return self.add_version(path, sha, len(data), at, op, data=data if len(data) <= self.max_blob_bytes else None)

    def record_hash(self, path: str, sha256: str, size: int, at: str, *, op: str = "write") -> FileVersion:
        """Record a version by its hash and size alone (a file over the cap: its bytes are not kept)."""
        return self.add_version(path, sha256, size, at, op)

    def record_delete(self, path: str, at: str, *, op: str = "delete") -> FileVersion:
        """Record that from ``at`` on ``path`` is absent (``op`` 'move' for a move away)."""
        return self.add_version(path, None, 0, at, op)

    def add_version(self, path: str, sha256: str | None, size: int, at: str, op: str, *,
                    data: bytes | None = None, id: int | None = None) -> FileVersion:  # fmt: skip
        """Add one row as it is given (an import restores rows so, ``id`` included); ``data``, when
        given, is stored as the blob ``sha256`` unless a blob of that hash is there already."""
        at = _check_version(path, sha256, size, at, op)
        with self._db.transaction() as conn:
            if id is None:
                at = _after_latest(conn, self.space, path, at)
            if data is not None and sha256 is not None:
                # on PostgreSQL this insert's table lock keeps ``afi gc`` from dropping the blob until
                # the version naming it commits
                conn.execute(
                    "INSERT INTO file_blobs (sha256, size, data) VALUES (?, ?, ?) ON CONFLICT (sha256) DO NOTHING",
                    (sha256, len(data), data),
                )
            elif sha256 is not None:
                # a version naming a blob it does not bring (a fork shares SRC's) keeps gc from dropping
                # that blob between its check and this version's commit
                self._db.engine.guard_blob(conn)
            columns, values = "space, path, sha256, size, at, op", [self.space, path, sha256, size, at, op]
            if id is not None:
                columns, values = "id, " + columns, [id, *values]
            marks = ", ".join("?" * len(values))
            row = conn.execute(
                f"INSERT INTO file_versions ({columns}) VALUES ({marks}) RETURNING {_COLUMNS}", values
            ).fetchone()
        return _version(row)

    # -- reads -----------------------------------------------------------------------------

    def latest(self, path: str) -> FileVersion | None:
        """The newest row of ``path`` (None when it has none)."""
        with self._db.read() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM file_versions WHERE space = ? AND path = ? ORDER BY at DESC, id DESC LIMIT 1",
                (self.space, path),
            ).fetchone()
        return None if row is None else _version(row)

    def versions(self, path: str) -> list[FileVersion]:
        """Every kept row of ``path``, oldest first."""
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM file_versions WHERE space = ? AND path = ? ORDER BY at, id",
                (self.space, path),
            ).fetchall()
        return [_version(r) for r in rows]

    def kept(self) -> bool:
        """Whether the space keeps any file version."""
        with self._db.read() as conn:
            return (
                conn.execute("SELECT 1 FROM file_versions WHERE space = ? LIMIT 1", (self.space,)).fetchone()
                is not None
            )

    def paths(self) -> list[str]:
        """Every path with a kept row, sorted."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT DISTINCT path FROM file_versions WHERE space = ? ORDER BY path", (self.space,)
            ).fetchall()
        return [str(r[0]) for r in rows]

    def rows_at(self, instant: str) -> dict[str, FileVersion]:
        """Path → the row in effect at ``instant`` (the newest at or before it), absent ones included.

        Kept for the instants asked last while the space's rows stay as they were."""
        token = self._token()
        with self._cache_lock:
            cached = self._cache.get(instant)
            if cached is not None and cached[0] == token:
                return cached[1]
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM (SELECT {_COLUMNS}, ROW_NUMBER() OVER "
                "(PARTITION BY path ORDER BY at DESC, id DESC) AS newest FROM file_versions "
                "WHERE space = ? AND at <= ?) AS ranked WHERE newest = 1 ORDER BY path",
                (self.space, instant),
            ).fetchall()
        found = {v.path: v for v in map(_version, rows)}
        with self._cache_lock:
            if len(self._cache) >= 16:
                self._cache.pop(next(iter(self._cache)))
            self._cache[instant] = (token, found)
        return found

    def at(self, instant: str) -> dict[str, tuple[str, int]]:
        """Path → (sha256, size) of every file the history says was present at ``instant`` (a path
        without any row is not here: its current bytes stand for its past, see :meth:`untracked`)."""
        return {p: (v.sha256, v.size) for p, v in self.rows_at(instant).items() if v.sha256 is not None}

    def untracked(self) -> dict[str, tuple[int, int]]:
        """Path → (size, mtime in ns) of the indexed files that have no row (written before file
        history, or on disk behind the provider's back and not changed through it since)."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT f.path, f.size, f.mtime_ns FROM workspace_files f WHERE f.space = ? AND NOT EXISTS "
                "(SELECT 1 FROM file_versions v WHERE v.space = f.space AND v.path = f.path) ORDER BY f.path",
                (self.space,),
            ).fetchall()
        return {str(p): (int(s), int(m)) for p, s, m in rows}

    def blob(self, sha256: str, *, path: str | None = None) -> bytes:
        """The bytes of a blob; NotFound when none is kept, TooLarge for a version over the cap."""
        found = self.blobs([sha256])
        if sha256 in found:
            return found[sha256]
        with self._db.read() as conn:
            size = conn.execute("SELECT max(size) FROM file_versions WHERE sha256 = ?", (sha256,)).fetchone()
        if size is not None and size[0] is not None and int(size[0]) > min(self.max_blob_bytes, SPARSE_HOLE_BYTES):
            raise TooLarge(
                f"this version's bytes were not kept: a file over {format_size(self.max_blob_bytes)} "
                f"(AFI_HISTORY_MAX_FILE_SIZE), or with more than {format_size(SPARSE_HOLE_BYTES)} of holes, "
                "keeps its size and digest only",
                path=path,
            )
        raise NotFound(f"no bytes are kept for the version {sha256[:12]}…", path=path)

    def blobs(self, shas: Iterable[str]) -> dict[str, bytes]:
        """The kept bytes of each of these blobs (a missing one is left out)."""
        wanted = list(dict.fromkeys(shas))
        found: dict[str, bytes] = {}
        for start in range(0, len(wanted), 200):
            chunk = wanted[start : start + 200]
            with self._db.read() as conn:
                rows = conn.execute(
                    f"SELECT sha256, data FROM file_blobs WHERE sha256 IN ({', '.join('?' * len(chunk))})", chunk
                ).fetchall()
            found.update((str(sha), bytes(data)) for sha, data in rows)
        return found

    def kept_blobs(self, shas: Iterable[str]) -> set[str]:
        """Which of these blobs keep their bytes (without reading them)."""
        return set(self.kept_sizes(shas))

    def kept_sizes(self, shas: Iterable[str]) -> dict[str, int]:
        """The size of each of these blobs that keeps its bytes (without reading them)."""
        wanted = list(dict.fromkeys(shas))
        found: dict[str, int] = {}
        for start in range(0, len(wanted), 200):
            chunk = wanted[start : start + 200]
            with self._db.read() as conn:
                rows = conn.execute(
                    f"SELECT sha256, size FROM file_blobs WHERE sha256 IN ({', '.join('?' * len(chunk))})", chunk
                ).fetchall()
            found.update((str(sha), int(size)) for sha, size in rows)
        return found

    def all_versions(self) -> Iterator[FileVersion]:
        """Every row of the space in id order, a page at a time (what a bundle exports)."""
        after = 0
        while True:
            with self._db.read() as conn:
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM file_versions WHERE space = ? AND id > ? ORDER BY id LIMIT 1000",
                    (self.space, after),
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield _version(row)
            after = int(rows[-1][0])

    def _token(self) -> tuple[int, int]:
        """Changes with every row added or dropped (ids only grow; a drop lowers the count)."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT coalesce(max(id), 0), count(*) FROM file_versions WHERE space = ?", (self.space,)
            ).fetchone()
        return int(row[0]), int(row[1])
