"""A space's file index: the text of its workspace files in the store, with a trigram index on it.

Text files up to ``INDEX_MAX_BYTES`` are indexed, so exact and regex search over ``/files`` are index
lookups: an FTS5 trigram table beside ``workspace_files`` in a SQLite store, a ``gin_trgm_ops`` index
on its ``text`` in a PostgreSQL one (:mod:`afi.storage.pg_trigram`). The others (larger, binary, not
UTF-8) are kept with an empty text, and grep reads them from disk (:meth:`FileIndex.unindexed`,
:meth:`FileIndex.opened`). Every regular file's size is kept too, which is what the space's quota
counts. Writes made through the provider are indexed at once; edits made on disk behind its back are
picked up by :meth:`FileIndex.refresh`, which a search runs at most every ``REFRESH_SECONDS``.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
import threading
import time
from collections.abc import Iterator
from typing import NamedTuple

from afi.storage.database import Database
from afi.storage.pg_trigram import ilike, like_pattern
from afi.storage.trigram import trigram_query

from ..fabric.errors import MemoryValidationError
from .jail import FileJail, read_at_most

__all__ = ["INDEX_MAX_BYTES", "TEMP_PREFIX", "FileIndex", "Opened"]

INDEX_MAX_BYTES = 1 << 20
REFRESH_SECONDS = 2.0
TEMP_PREFIX = ".afi-tmp-"  # a whole-file write's temporary name: never listed, read, indexed or written by users


def _index_text(data: bytes) -> str:
    """Given file bytes, return the text to index ("" for binary or oversized files)."""
    if len(data) > INDEX_MAX_BYTES or b"\x00" in data:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def _indexed_name(rel: str) -> bool:
    """Not a temporary file, and valid UTF-8 (os.fwalk hands undecodable bytes over as lone surrogates)."""
    return not any(part.startswith(TEMP_PREFIX) for part in rel.split("/")) and not any(
        "\udc80" <= c <= "\udcff" for c in rel
    )


class Opened(NamedTuple):
    """A workspace file open for reading: its descriptor and its size when opened."""

    fd: int
    size: int


class FileIndex:
    """The indexed files of one space (``rel`` paths, relative to the space's folder)."""

    def __init__(self, space: str, jail: FileJail, database: Database) -> None:
        self.space = space
        self.jail = jail
        self._db = database
        self._refreshed_at = 0.0
        self._refresh_lock = threading.Lock()
        self._unindexed: tuple[int, list[tuple[int, str]]] | None = None  # (change token, files)

    def walk(self, rel: str) -> Iterator[tuple[str, os.stat_result]]:
        """Yield (workspace path, stat) of every regular file below the folder ``rel``, symlinks not followed.

        The walk goes by descriptors from the jail's folder (``os.fwalk``), so a folder swapped for a
        symlink meanwhile is not entered.
        """
        prefix = f"{rel}/" if rel else ""
        try:
            with self.jail.folder(rel) as top:
                for dirpath, _dirs, names, dirfd in os.fwalk(".", dir_fd=top):
                    base = prefix + (dirpath[2:] + "/" if dirpath != "." else "")
                    for name in names:
                        with contextlib.suppress(FileNotFoundError):
                            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                            if stat_mod.S_ISREG(st.st_mode) and _indexed_name(base + name):
                                yield base + name, st
        except (MemoryValidationError, FileNotFoundError, NotADirectoryError):
            return

    def index_path(self, rel: str) -> bytes | None:
        """Index one file; return its bytes when they were read (small files)."""
        data: bytes | None = None
        text = ""
        try:
            fd = self.jail.open(rel, os.O_RDONLY | os.O_NONBLOCK)
        except MemoryValidationError:  # a symlink is never read or indexed
            self.forget_paths([rel], prefix=False)
            return None
        try:
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode) or st.st_nlink > 1:
                self.forget_paths([rel], prefix=False)  # a special or hard-linked file is never read or indexed
                return None
            if st.st_size <= INDEX_MAX_BYTES:
                data = read_at_most(fd, INDEX_MAX_BYTES + 1)
                text = _index_text(data)
        finally:
            os.close(fd)
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO workspace_files(space, path, size, mtime_ns, text) VALUES (?,?,?,?,?) "
                "ON CONFLICT(space, path) DO UPDATE SET size=excluded.size, mtime_ns=excluded.mtime_ns, "
                "text=excluded.text",
                (self.space, rel, st.st_size, st.st_mtime_ns, text),
            )
        return data

    def forget_paths(self, rels: list[str], *, prefix: bool) -> None:
        with self._db.transaction() as conn:
            for rel in rels:
                conn.execute("DELETE FROM workspace_files WHERE space = ? AND path = ?", (self.space, rel))
                if prefix:
                    conn.execute(
                        "DELETE FROM workspace_files WHERE space = ? AND substr(path, 1, ?) = ?",
                        (self.space, len(rel) + 1, rel + "/"),
                    )

    def refresh(self, *, force: bool = False) -> None:
        """Bring the index in line with the disk (edits made behind the provider's back)."""
        now = time.monotonic()
        if not force and now - self._refreshed_at < REFRESH_SECONDS:
            return
        with self._refresh_lock:
            if not force and time.monotonic() - self._refreshed_at < REFRESH_SECONDS:
                return
            with self._db.read() as conn:
                rows = conn.execute(
                    "SELECT path, size, mtime_ns FROM workspace_files WHERE space = ?", (self.space,)
                ).fetchall()
            known = {str(path): (int(size), int(mtime_ns)) for path, size, mtime_ns in rows}
            for rel, st in self.walk(""):
                if known.pop(rel, None) != (st.st_size, st.st_mtime_ns):
                    self.index_path(rel)
            if known:
                self.forget_paths(list(known), prefix=False)
            self._refreshed_at = time.monotonic()

    def candidates(self, literal: str | None) -> list[tuple[int, str]]:
        """Return (rowid, workspace path) of indexed files that may contain ``literal`` in any case
        (all when None or shorter than three characters)."""
        if literal is None or len(literal) < 3:
            sql, args = "SELECT rowid, path FROM workspace_files WHERE space = ?", [self.space]
        elif self._db.dialect == "postgresql":
            sql = f"SELECT rowid, path FROM workspace_files WHERE space = ? AND {ilike('text')}"
            args = [self.space, like_pattern(literal)]
        else:
            sql = (
                "SELECT f.rowid, f.path FROM workspace_trigram t CROSS JOIN workspace_files f ON f.rowid = t.rowid "
                "WHERE workspace_trigram MATCH ? AND f.space = ?"
            )
            args = [trigram_query([literal]), self.space]
        with self._db.read() as conn:
            rows = conn.execute(sql, args).fetchall()
        return [(int(rowid), str(path)) for rowid, path in rows]

    def unindexed(self) -> list[tuple[int, str]]:
        """Return (rowid, workspace path) of the files whose text is not indexed (over
        ``INDEX_MAX_BYTES``, binary or not UTF-8), which grep reads from disk. A file with bytes always
        has a text once indexed, so an empty text with a size says so; the list is kept until the
        index changes, as finding it reads every row of the space."""
        token = self.change_token()
        held = self._unindexed
        if held is not None and held[0] == token:
            return held[1]
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT rowid, path FROM workspace_files WHERE space = ? AND size > 0 AND text = ''", (self.space,)
            ).fetchall()
        found = [(int(rowid), str(path)) for rowid, path in rows]
        self._unindexed = (token, found)
        return found

    @contextlib.contextmanager
    def opened(self, rel: str) -> Iterator[Opened | None]:
        """The file ``rel`` open for reading, or None when it is gone or is not read (a symlink, a
        special or hard-linked file: as :meth:`index_path` never reads one); closed afterwards."""
        try:
            fd = self.jail.open(rel, os.O_RDONLY | os.O_NONBLOCK)
        except (MemoryValidationError, OSError):
            yield None
            return
        try:
            st = os.fstat(fd)
            yield Opened(fd, st.st_size) if stat_mod.S_ISREG(st.st_mode) and st.st_nlink == 1 else None
        finally:
            os.close(fd)

    def texts_by_rowid(self, rowids: list[int]) -> dict[int, str]:
        """The indexed texts of the given rows."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT rowid, text FROM workspace_files WHERE space = ? AND rowid IN ({marks})",
                [self.space, *rowids],
            ).fetchall()
        return {int(rowid): str(text) for rowid, text in rows}

    def change_token(self) -> int:
        """Grows with every change to this space's file index (kept by triggers on either engine)."""
        with self._db.read() as conn:
            row = conn.execute("SELECT seq FROM workspace_seq WHERE space = ?", (self.space,)).fetchone()
        return int(row[0]) if row else 0

    def used_bytes(self, *, besides: str) -> int:
        """The bytes of this space's indexed files, the file ``besides`` left out."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT coalesce(sum(size), 0) FROM workspace_files WHERE space = ? AND path != ?",
                (self.space, besides),
            ).fetchone()
        return int(row[0])
