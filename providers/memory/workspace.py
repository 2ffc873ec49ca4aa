"""A space's jailed workspace: real files under ``<root>/<space>``, and their text index.

Every path goes through :class:`~.jail.FileJail` before any I/O. Text files up to
``INDEX_MAX_BYTES`` are indexed in ``workspace_files`` with an FTS5 trigram index beside it, so
exact and regex search over ``/files`` are index lookups. Writes made through the provider are
indexed at once; edits made on disk behind its back are picked up by :meth:`Workspace.refresh`,
which a search runs at most every ``REFRESH_SECONDS``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat as stat_mod
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from afi.errors import Conflict, InvalidPath, NotFound, TooLarge

from .errors import MemoryValidationError
from .jail import FileJail
from .sqlite import Connections

__all__ = ["INDEX_MAX_BYTES", "FileStat", "Workspace"]

INDEX_MAX_BYTES = 1 << 20
REFRESH_SECONDS = 2.0
MAX_READ_BYTES = 256 << 20

SCHEMA = """
CREATE TABLE IF NOT EXISTS workspace_files (
    rowid INTEGER PRIMARY KEY,
    space TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (space, path)
);
CREATE VIRTUAL TABLE IF NOT EXISTS workspace_trigram USING fts5(
    text, content='workspace_files', content_rowid='rowid', tokenize='trigram'
);
CREATE TRIGGER IF NOT EXISTS workspace_files_ai AFTER INSERT ON workspace_files BEGIN
    INSERT INTO workspace_trigram(rowid, text) VALUES (new.rowid, new.text);
END;
CREATE TRIGGER IF NOT EXISTS workspace_files_ad AFTER DELETE ON workspace_files BEGIN
    INSERT INTO workspace_trigram(workspace_trigram, rowid, text) VALUES ('delete', old.rowid, old.text);
END;
CREATE TABLE IF NOT EXISTS workspace_seq (space TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS workspace_seq_ai AFTER INSERT ON workspace_files BEGIN
    INSERT INTO workspace_seq(space, seq) VALUES (new.space, 1) ON CONFLICT(space) DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER IF NOT EXISTS workspace_seq_ad AFTER DELETE ON workspace_files BEGIN
    INSERT INTO workspace_seq(space, seq) VALUES (old.space, 1) ON CONFLICT(space) DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER IF NOT EXISTS workspace_seq_au AFTER UPDATE ON workspace_files BEGIN
    INSERT INTO workspace_seq(space, seq) VALUES (new.space, 1) ON CONFLICT(space) DO UPDATE SET seq = seq + 1;
END;
CREATE TRIGGER IF NOT EXISTS workspace_files_au AFTER UPDATE ON workspace_files BEGIN
    INSERT INTO workspace_trigram(workspace_trigram, rowid, text) VALUES ('delete', old.rowid, old.text);
    INSERT INTO workspace_trigram(rowid, text) VALUES (new.rowid, new.text);
END;
"""


@dataclass(frozen=True)
class FileStat:
    """What the tree needs of a workspace entry."""

    name: str
    kind: str  # "file" | "directory" | "symlink"
    size: int
    mtime: float
    ctime: float
    mtime_ns: int
    ino: int
    target: str | None = None


def _file_stat(name: str, st: os.stat_result, target: str | None = None) -> FileStat:
    if stat_mod.S_ISDIR(st.st_mode):
        kind = "directory"
    elif stat_mod.S_ISLNK(st.st_mode):
        kind = "symlink"
    else:
        kind = "file"
    size = 0 if kind == "directory" else st.st_size
    return FileStat(name, kind, size, st.st_mtime, st.st_ctime, st.st_mtime_ns, st.st_ino, target)


def _index_text(data: bytes) -> str:
    """Given file bytes, return the text to index ("" for binary or oversized files)."""
    if len(data) > INDEX_MAX_BYTES or b"\x00" in data:
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""


class Workspace:
    """One space's files: jailed disk operations plus the text index (``rel`` paths, "" is the root)."""

    def __init__(self, root: Path, space: str, connections: Connections) -> None:
        self.space = space
        self.jail = FileJail(root / space)
        self._db = connections
        self._refreshed_at = 0.0
        self._refresh_lock = threading.Lock()

    # -- paths -----------------------------------------------------------------------------

    def _resolve(self, rel: str, afi_path: str) -> Path:
        try:
            return self.jail.resolve(rel)
        except MemoryValidationError as err:
            raise InvalidPath(err.message, path=afi_path) from None

    def _lstat(self, rel: str, afi_path: str) -> tuple[Path, os.stat_result]:
        """Resolve the parent through the jail and lstat the leaf (a symlink leaf is returned, not followed)."""
        parent_rel, _, name = rel.rpartition("/")
        parent = self._resolve(parent_rel, afi_path)
        target = parent / name if name else parent
        try:
            return target, os.lstat(target)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound("no such file or folder", path=afi_path) from None

    # -- reads -----------------------------------------------------------------------------

    def stat(self, rel: str, afi_path: str) -> FileStat:
        target, st = self._lstat(rel, afi_path)
        return _file_stat(target.name, st, self._link_target(target, st))

    def listdir(self, rel: str, afi_path: str) -> list[FileStat]:
        """Given a folder, return its children sorted by name."""
        folder = self._resolve(rel, afi_path)
        try:
            with os.scandir(folder) as it:
                children = [_file_stat(e.name, e.stat(follow_symlinks=False)) for e in it]
        except FileNotFoundError:
            raise NotFound("no such folder", path=afi_path) from None
        except NotADirectoryError:
            raise InvalidPath("this is a file, not a folder: read it instead of listing it", path=afi_path) from None
        children.sort(key=lambda c: c.name)
        return children

    def read(self, rel: str, afi_path: str, offset: int, length: int | None) -> tuple[bytes, FileStat]:
        try:
            fd = self.jail.open(rel, os.O_RDONLY)
        except MemoryValidationError as err:
            raise InvalidPath(err.message, path=afi_path) from None
        except (FileNotFoundError, NotADirectoryError):
            raise NotFound("no such file", path=afi_path) from None
        except IsADirectoryError:
            raise InvalidPath("this is a folder: list it instead of reading it", path=afi_path) from None
        try:
            st = os.fstat(fd)
            if stat_mod.S_ISDIR(st.st_mode):
                raise InvalidPath("this is a folder: list it instead of reading it", path=afi_path)
            want = max(0, st.st_size - offset) if length is None else length
            if want > MAX_READ_BYTES:
                raise TooLarge(f"read at most {MAX_READ_BYTES} bytes per call; use offset and length", path=afi_path)
            data = os.pread(fd, want, offset) if want else b""
        finally:
            os.close(fd)
        return data, _file_stat(rel.rpartition("/")[2], st)

    def _link_target(self, target: Path, st: os.stat_result) -> str | None:
        if not stat_mod.S_ISLNK(st.st_mode):
            return None
        link = os.readlink(target)
        # Only a relative target that stays inside the jail is shown; others would leak host paths.
        return link if not link.startswith("/") and ".." not in link.split("/") else None

    # -- writes ----------------------------------------------------------------------------

    def write(
        self, rel: str, afi_path: str, data: bytes, *, offset: int | None, append: bool, create_only: bool
    ) -> tuple[FileStat, bytes | None]:
        """Write a file (parents created inside the jail); return its stat and its full text when small.

        A whole-file write lands atomically (temp file + rename), so a reader never sees half of it.
        """
        target = self._resolve(rel, afi_path)
        if target == self.jail.root:
            raise InvalidPath("/files is the workspace folder itself", path=afi_path)
        exists = os.path.lexists(target)
        if exists and os.path.isdir(target):
            raise Conflict("a folder is here; a file cannot overwrite it", path=afi_path)
        if create_only and exists:
            raise Conflict("the file exists and create_only was asked", path=afi_path)
        self._make_parents(target.parent, afi_path)
        if append or (offset is not None and exists):
            flags = os.O_WRONLY | os.O_NOFOLLOW | (os.O_APPEND | os.O_CREAT if append else 0)
            fd = os.open(target, flags, 0o644)
            try:
                _write_all(fd, data, None if append else offset or 0)
            finally:
                os.close(fd)
        else:
            if offset:
                data = b"\x00" * offset + data
            tmp = target.parent / f".afi-tmp-{uuid.uuid4().hex}"
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    _write_all(fd, data, None)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
        st = os.lstat(target)
        full = self._index_path(rel, target, st)
        return _file_stat(target.name, st), full

    def _make_parents(self, folder: Path, afi_path: str) -> None:
        if folder.is_dir():
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise Conflict("a parent of this path is a file, not a folder", path=afi_path) from None

    def mkdir(self, rel: str, afi_path: str, *, parents: bool) -> FileStat:
        target = self._resolve(rel, afi_path)
        if os.path.lexists(target):
            raise Conflict("this path already exists", path=afi_path)
        try:
            target.mkdir(parents=parents)
        except FileNotFoundError:
            raise NotFound("the parent folder does not exist (use parents to create it)", path=afi_path) from None
        except NotADirectoryError:
            raise Conflict("a parent of this path is a file, not a folder", path=afi_path) from None
        return _file_stat(target.name, os.lstat(target))

    def delete(self, rel: str, afi_path: str, *, recursive: bool) -> list[str]:
        """Delete a file or folder; return the workspace paths of the files removed."""
        target, st = self._lstat(rel, afi_path)
        if target == self.jail.root:
            raise InvalidPath("/files itself cannot be deleted", path=afi_path)
        if stat_mod.S_ISDIR(st.st_mode):
            removed = [p for p, _ in self._walk(target)]
            with os.scandir(target) as children:
                non_empty = any(children)
            if non_empty and not recursive:
                raise Conflict("the folder is not empty (delete it recursively)", path=afi_path)
            shutil.rmtree(target)
        else:
            os.unlink(target)
            removed = [rel]
        self._forget_paths([rel], prefix=stat_mod.S_ISDIR(st.st_mode))
        return removed

    def move(
        self, src_rel: str, src: str, dst_rel: str, dst: str, *, overwrite: bool
    ) -> tuple[FileStat, list[tuple[str, str]]]:
        """Rename a file or folder; return its new stat and the (old, new) workspace paths of moved files."""
        source, st = self._lstat(src_rel, src)
        target = self._resolve(dst_rel, dst)
        if source == self.jail.root or target == self.jail.root:
            raise InvalidPath("/files itself cannot be moved or replaced", path=src)
        if target == source:
            return _file_stat(target.name, st), []
        if dst_rel.startswith(src_rel + "/"):
            raise InvalidPath("a folder cannot be moved inside itself", path=dst)
        if os.path.lexists(target):
            if not overwrite:
                raise Conflict("the destination exists (ask to overwrite)", path=dst)
            if os.path.isdir(target) and not stat_mod.S_ISDIR(st.st_mode):
                raise Conflict("a folder is at the destination; a file cannot replace it", path=dst)
        self._make_parents(target.parent, dst)
        is_dir = stat_mod.S_ISDIR(st.st_mode)
        moved = [(p, dst_rel + p[len(src_rel) :]) for p, _ in self._walk(source)] if is_dir else [(src_rel, dst_rel)]
        try:
            os.replace(source, target)
        except OSError as err:
            raise Conflict(f"cannot move here: {err.strerror}", path=dst) from None
        self._forget_paths([src_rel], prefix=is_dir)
        for _, new in moved:
            new_path = self.jail.root / new
            self._index_path(new, new_path, os.lstat(new_path))
        return _file_stat(target.name, os.lstat(target)), moved

    # -- index -----------------------------------------------------------------------------

    def _walk(self, folder: Path) -> Iterator[tuple[str, os.stat_result]]:
        """Yield (workspace path, stat) of every regular file below a folder, symlinks not followed."""
        for dirpath, dirnames, filenames in os.walk(folder):
            base = Path(dirpath)
            for name in filenames:
                full = base / name
                st = os.lstat(full)
                if stat_mod.S_ISREG(st.st_mode) and not name.startswith(".afi-tmp-"):
                    yield self.jail.relative(full), st
            dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]

    def _index_path(self, rel: str, full: Path, st: os.stat_result) -> bytes | None:
        """Index one file; return its bytes when they were read (small files), else None."""
        data: bytes | None = None
        text = ""
        if not stat_mod.S_ISREG(st.st_mode):
            self._forget_paths([rel], prefix=False)  # a symlink or special file is never read or indexed
            return None
        if st.st_size <= INDEX_MAX_BYTES:
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(INDEX_MAX_BYTES + 1)
            text = _index_text(data)
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO workspace_files(space, path, size, mtime_ns, text) VALUES (?,?,?,?,?) "
                "ON CONFLICT(space, path) DO UPDATE SET size=excluded.size, mtime_ns=excluded.mtime_ns, "
                "text=excluded.text",
                (self.space, rel, st.st_size, st.st_mtime_ns, text),
            )
        return data

    def _forget_paths(self, rels: list[str], *, prefix: bool) -> None:
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
            conn = self._db.get()
            known = {
                path: (size, mtime_ns)
                for path, size, mtime_ns in conn.execute(
                    "SELECT path, size, mtime_ns FROM workspace_files WHERE space = ?", (self.space,)
                )
            }
            for rel, st in self._walk(self.jail.root):
                if known.pop(rel, None) != (st.st_size, st.st_mtime_ns):
                    self._index_path(rel, self.jail.root / rel, st)
            if known:
                self._forget_paths(list(known), prefix=False)
            self._refreshed_at = time.monotonic()

    def candidates(self, literal: str | None) -> list[tuple[int, str]]:
        """Return (rowid, workspace path) of indexed files that may contain ``literal`` (all when None)."""
        conn = self._db.get()
        if literal is not None and len(literal) >= 3:
            quoted = '"' + literal.replace('"', '""') + '"'
            rows = conn.execute(
                "SELECT f.rowid, f.path FROM workspace_trigram t CROSS JOIN workspace_files f ON f.rowid = t.rowid "
                "WHERE workspace_trigram MATCH ? AND f.space = ?",
                (quoted, self.space),
            )
        else:
            rows = conn.execute("SELECT rowid, path FROM workspace_files WHERE space = ?", (self.space,))
        return [(int(rowid), str(path)) for rowid, path in rows]

    def texts_by_rowid(self, rowids: list[int]) -> dict[int, str]:
        """The indexed texts of the given rows."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        rows = self._db.get().execute(
            f"SELECT rowid, text FROM workspace_files WHERE space = ? AND rowid IN ({marks})", [self.space, *rowids]
        )
        return {int(rowid): str(text) for rowid, text in rows}

    def change_token(self) -> int:
        """Grows with every change to this space's file index (kept by triggers)."""
        row = self._db.get().execute("SELECT seq FROM workspace_seq WHERE space = ?", (self.space,)).fetchone()
        return int(row[0]) if row else 0


def _write_all(fd: int, data: bytes, offset: int | None) -> None:
    """Write every byte (a short write on a full disk is an error, not a silent truncation)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(28, "No space left on device")
        view = view[written:]
        if offset is not None:
            offset += written
