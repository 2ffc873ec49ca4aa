"""A space's file index: the text of its workspace files in the store, with a trigram index on it.

Text files up to ``INDEX_MAX_BYTES`` are indexed, so exact and regex search over ``/files`` are index
lookups: an FTS5 trigram table beside ``workspace_files`` in a SQLite store, a ``gin_trgm_ops`` index
on its ``text`` in a PostgreSQL one (:mod:`afi.storage.pg_trigram`). The others (larger, binary, not
UTF-8) are kept with an empty text, and grep reads them from disk (:meth:`FileIndex.unindexed`,
:meth:`FileIndex.opened`). Every regular file's size is kept too, and what the space's quota charges
it (:func:`.quota.charged`). Writes made through the provider are indexed at once; edits made on disk
behind its back are brought in line by :meth:`FileIndex.catch_up`, which each search page runs over
its scope within its own budget.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from afi.storage.database import Database

from ..fabric.errors import MemoryValidationError
from .folders import FolderNames, shown_name
from .jail import FileJail, read_at_most
from .quota import charged

__all__ = ["INDEX_MAX_BYTES", "SEARCH_REFRESH", "TEMP_PREFIX", "FileIndex", "Opened", "RefreshBudget"]

INDEX_MAX_BYTES = 1 << 20
_UPSERT = (
    "INSERT INTO workspace_files(space, path, size, mtime_ns, text, charged) VALUES (?,?,?,?,?,?) "
    "ON CONFLICT(space, path) DO UPDATE SET size=excluded.size, mtime_ns=excluded.mtime_ns, "
    "text=excluded.text, charged=excluded.charged"
)
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


def _indexed_part(name: str) -> bool:
    """Not a temporary name, and valid UTF-8 (os.fwalk hands undecodable bytes over as lone surrogates)."""
    return shown_name(name, TEMP_PREFIX)


def _indexed_name(rel: str) -> bool:
    """Every folder and the file of a workspace path can be indexed ("" is the workspace itself)."""
    return not rel or all(_indexed_part(part) for part in rel.split("/"))


def _first_under(within: str) -> str:
    """The smallest path under the folder ``within`` could have ("" for the whole workspace)."""
    return f"{within}/" if within else ""


@dataclass(frozen=True)
class RefreshBudget:
    """How much one search may spend bringing the index in line before its page ends (where it got to)."""

    seconds: float = 0.5
    files: int = 50_000


SEARCH_REFRESH = RefreshBudget()
CATCH_UP_CHUNK = 128  # files compared with their rows at a time (the budget is looked at between them)
INDEX_BATCH = 256  # files indexed in one transaction


class Opened(NamedTuple):
    """A workspace file open for reading: its descriptor and its size when opened."""

    fd: int
    size: int


class FileIndex:
    """The indexed files of one space (``rel`` paths, relative to the space's folder)."""

    def __init__(self, space: str, jail: FileJail, database: Database, folders: FolderNames) -> None:
        self.space = space
        self.jail = jail
        self._db = database
        self._folders = folders
        self._clean_at: dict[str, float] = {}  # folder → when it was last brought in line from its start
        # folder → the stretch (from, up to: None for the end) last brought in line, and since when
        self._stretch: dict[str, tuple[str, str | None, float]] = {}
        self._refresh_lock = threading.Lock()
        self._unindexed: tuple[int, list[tuple[int, str]]] | None = None  # (change token, files)

    def walk(self, rel: str) -> Iterator[tuple[str, os.stat_result]]:
        """Yield (workspace path, stat) of every regular file below the folder ``rel``, symlinks not followed.

        The walk goes by descriptors from the jail's folder (``os.fwalk``), so a folder swapped for a
        symlink meanwhile is not entered; nor is one whose name is never shown (a temporary name, or
        not UTF-8): no file below it could be named.
        """
        prefix = f"{rel}/" if rel else ""
        if not _indexed_name(rel):
            return
        try:
            with self.jail.folder(rel) as top:
                for dirpath, dirs, names, dirfd in os.fwalk(".", dir_fd=top):
                    dirs[:] = [d for d in dirs if _indexed_part(d)]
                    base = prefix + (dirpath[2:] + "/" if dirpath != "." else "")
                    for name in names:
                        if not _indexed_part(name):
                            continue
                        with contextlib.suppress(FileNotFoundError):
                            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                            if stat_mod.S_ISREG(st.st_mode):
                                yield base + name, st
        except (MemoryValidationError, FileNotFoundError, NotADirectoryError):
            return

    def index_path(self, rel: str) -> bytes | None:
        """Index one file; return its bytes when they were read (small files)."""
        found = self._read(rel)
        if found is None:
            self.forget_paths([rel], prefix=False)  # a symlink, a special or a hard-linked file is never indexed
            return None
        row, data = found
        with self._db.transaction() as conn:
            conn.execute(_UPSERT, row)
        return data

    def _read(self, rel: str) -> tuple[tuple[str, str, int, int, str, int], bytes | None] | None:
        """The index row of the file at ``rel`` and its bytes when it is small; None when it is not a
        regular file with one link (a symlink, a special or hard-linked file: never read nor indexed).

        Raises:
            OSError: the file is gone, or a folder on its way.
        """
        try:
            fd = self.jail.open(rel, os.O_RDONLY | os.O_NONBLOCK)
        except MemoryValidationError:  # a symlink on the way
            return None
        try:
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode) or st.st_nlink > 1:
                return None
            data = read_at_most(fd, INDEX_MAX_BYTES + 1) if st.st_size <= INDEX_MAX_BYTES else None
        finally:
            os.close(fd)
        text = _index_text(data) if data is not None else ""
        return (self.space, rel, st.st_size, st.st_mtime_ns, text, charged(st)), data

    def _index_many(self, rels: list[str]) -> None:
        """Index these files in one transaction (one that is gone, or no longer a regular file, is forgotten)."""
        rows, gone = [], []
        for rel in rels:
            try:
                found = self._read(rel)
            except OSError:
                found = None
            if found is None:
                gone.append(rel)
            else:
                rows.append(found[0])
        with self._db.transaction() as conn:
            if rows:
                conn.executemany(_UPSERT, rows)
            for rel in gone:
                conn.execute("DELETE FROM workspace_files WHERE space = ? AND path = ?", (self.space, rel))

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
        """Bring the whole index in line with the disk (edits made behind the provider's back), unless
        it was less than ``REFRESH_SECONDS`` ago and not ``force``."""
        if force or not self._clean(""):
            self.catch_up("", "", None)

    def catch_up(self, within: str, after: str, budget: RefreshBudget | None) -> str | None:
        """Bring the index in line with the disk for the files under the folder ``within`` ("": all)
        from the path ``after`` on, in path order, until ``budget`` is spent (None: to the end).

        Return None when every file there is in line, else the first path not looked at yet: each
        file before it was compared with its row (a ``stat``), and indexed when new or changed; each
        row there whose file is gone was forgotten. What was brought in line is left alone for
        ``REFRESH_SECONDS``: the next call from a path inside it goes on from where this one stopped.
        """
        if self._clean(within):
            return None
        with self._refresh_lock:
            started = time.monotonic()
            single = self._file_at(within)
            if single is not None:  # a search of one file (or of nothing)
                self._bring_in_line(single, "", within, within + "\x01")
                if single:
                    return None
            low, since = after, started
            kept_from, kept_to, kept_since = self._stretch.get(within, ("", "", 0.0))
            if kept_from <= after and started - kept_since < REFRESH_SECONDS:  # in line already up to kept_to
                if kept_to is None:
                    return None
                if after < kept_to:
                    low, after, since = kept_from, kept_to, kept_since
            left = self._walk_in_line(within, after, budget, started)
            self._stretch[within] = (low, left, since)
            if left is None and low <= _first_under(within):
                self._clean_at[within] = since
            return left

    def _walk_in_line(self, within: str, after: str, budget: RefreshBudget | None, started: float) -> str | None:
        """Bring the files under ``within`` in line from ``after`` on, in chunks, until ``budget`` is
        spent; return the first path not looked at (None: the end was reached)."""
        files = self._ordered(within, after)
        low, visited, chunk = max(after, _first_under(within)), 0, []
        try:
            upcoming = next(files, None)
            while True:
                if upcoming is not None:
                    chunk.append(upcoming)
                    upcoming = next(files, None)
                if upcoming is not None and len(chunk) < CATCH_UP_CHUNK:
                    continue
                high = upcoming[0] if upcoming is not None else None
                self._bring_in_line(chunk, within, low, high)
                visited += len(chunk)
                chunk, low = [], high or ""
                if upcoming is None:
                    return None
                if budget is not None and (visited >= budget.files or time.monotonic() - started >= budget.seconds):
                    return upcoming[0]
        finally:
            files.close()

    def _file_at(self, rel: str) -> list[tuple[str, os.stat_result]] | None:
        """[(rel, stat)] when ``rel`` names a regular file, [] when it names nothing or something else
        that is not a folder; None when it is a folder (or the workspace itself)."""
        if not rel:
            return None
        parent, _, name = rel.rpartition("/")
        try:
            with self.jail.folder(parent) as folder:
                st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except (MemoryValidationError, OSError):
            return []
        if stat_mod.S_ISDIR(st.st_mode):
            return None
        return [(rel, st)] if stat_mod.S_ISREG(st.st_mode) and _indexed_name(rel) else []

    def _clean(self, within: str) -> bool:
        """Whether ``within`` or a folder holding it was brought in line less than ``REFRESH_SECONDS`` ago."""
        now = time.monotonic()
        parts = within.split("/") if within else []
        return any(now - self._clean_at.get("/".join(parts[:n]), -REFRESH_SECONDS) < REFRESH_SECONDS
                   for n in range(len(parts) + 1))  # fmt: skip

    def _ordered(self, within: str, after: str) -> Generator[tuple[str, os.stat_result], None, None]:
        """(path, stat) of the regular files under ``within`` in path order, from ``after`` on."""
        base = f"{within}/" if within else ""
        if not _indexed_name(within) or (after and not after.startswith(base) and after > base):
            return
        try:
            with self.jail.folder(within) as top:
                fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=top)
        except (MemoryValidationError, FileNotFoundError, NotADirectoryError):
            return
        try:
            yield from self._folders.files_in_order(fd, base, after.removeprefix(base) if after > base else "")
        finally:
            os.close(fd)

    def _bring_in_line(self, files: list[tuple[str, os.stat_result]], within: str, low: str, high: str | None) -> None:
        """Index those of ``files`` (all the files under ``within`` from ``low`` up to ``high``) whose
        rows differ, and forget the rows of that stretch no file has any more."""
        where, args = "space = ? AND path >= ?", [self.space, low]
        if high is not None:
            where, args = where + " AND path < ?", [*args, high]
        if within:
            where, args = where + " AND path > ? AND path < ?", [*args, within + "/", within + "0"]
        with self._db.read() as conn:
            rows = conn.execute(f"SELECT path, size, mtime_ns, charged FROM workspace_files WHERE {where}", args)
            known = {str(path): (int(size), int(mtime_ns), charge) for path, size, mtime_ns, charge in rows}
        stale = [rel for rel, st in files if known.pop(rel, None) != (st.st_size, st.st_mtime_ns, charged(st))]
        for start in range(0, len(stale), INDEX_BATCH):
            self._index_many(stale[start : start + INDEX_BATCH])
        if known:
            self.forget_paths(list(known), prefix=False)

    def candidates(self, literal: str | None) -> list[tuple[int, str]]:
        """Return (rowid, workspace path) of indexed files that may contain ``literal`` in any case
        (all when None or shorter than three characters)."""
        if literal is None or len(literal) < 3:
            sql, args = "SELECT rowid, path FROM workspace_files WHERE space = ?", [self.space]
        else:
            sql, args = self._db.engine.workspace_candidates(self.space, literal)
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
        """The bytes the quota charges this space's indexed files (:func:`.quota.charged`; a file not
        indexed since that was kept, its size), the file ``besides`` left out."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT coalesce(sum(coalesce(charged, size)), 0) FROM workspace_files WHERE space = ? AND path != ?",
                (self.space, besides),
            ).fetchone()
        return int(row[0])
