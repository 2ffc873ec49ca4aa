"""A space's jailed workspace: real files under ``<root>/<space>``, and their text index.

Every path goes through :class:`~.jail.FileJail` before any I/O. Text files up to
``INDEX_MAX_BYTES`` are indexed in ``workspace_files`` with an FTS5 trigram index beside it, so
exact and regex search over ``/files`` are index lookups. Writes made through the provider are
indexed at once; edits made on disk behind its back are picked up by :meth:`Workspace.refresh`,
which a search runs at most every ``REFRESH_SECONDS``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat as stat_mod
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from afi.errors import AfiError, Conflict, InvalidPath, NotFound, TooLarge
from afi.sqlite import Connections

from .errors import MemoryValidationError
from .jail import FileJail, read_at_most

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

    # -- reads -----------------------------------------------------------------------------

    def stat(self, rel: str, afi_path: str) -> FileStat:
        parent, name = self._split(rel, afi_path)
        if not name:
            return _file_stat(self.jail.root.name, os.stat(self.jail.root))
        st = self._leaf(parent, name, afi_path, symlink_ok=True)
        if st is None:
            raise NotFound("no such file or folder", path=afi_path)
        link = None
        if stat_mod.S_ISLNK(st.st_mode):
            with contextlib.suppress(OSError, AfiError), self._folder(parent, afi_path) as folder:
                link = _shown_link(os.readlink(name, dir_fd=folder))
        return _file_stat(name, st, link)

    def listdir(self, rel: str, afi_path: str) -> list[FileStat]:
        """Given a folder, return its children sorted by name."""
        try:
            fd = self.jail.open(rel, os.O_RDONLY | os.O_DIRECTORY)
        except MemoryValidationError as err:
            raise InvalidPath(err.message, path=afi_path) from None
        except FileNotFoundError:
            raise NotFound("no such folder", path=afi_path) from None
        except NotADirectoryError:
            raise InvalidPath("this is a file, not a folder: read it instead of listing it", path=afi_path) from None
        try:
            with os.scandir(fd) as it:
                children = [_file_stat(e.name, e.stat(follow_symlinks=False)) for e in it]
        finally:
            os.close(fd)
        children.sort(key=lambda c: c.name)
        return children

    def read(self, rel: str, afi_path: str, offset: int, length: int | None) -> tuple[bytes, FileStat]:
        try:
            fd = self.jail.open(rel, os.O_RDONLY | os.O_NONBLOCK)  # a pipe must not hang the call
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
            if not stat_mod.S_ISREG(st.st_mode):
                raise InvalidPath("only regular files are read here (this is a device, socket or pipe)", path=afi_path)
            want = max(0, st.st_size - offset) if length is None else length
            if want > MAX_READ_BYTES:
                raise TooLarge(f"read at most {MAX_READ_BYTES} bytes per call; use offset and length", path=afi_path)
            data = os.pread(fd, want, offset) if want else b""
        finally:
            os.close(fd)
        return data, _file_stat(Path(rel).name, st)

    # -- writes ----------------------------------------------------------------------------
    # Every write names its file relative to a folder descriptor from FileJail.folder (dir_fd), so a
    # symlink swapped into the path between a check and the write cannot redirect it.

    def _split(self, rel: str, afi_path: str) -> tuple[str, str]:
        try:
            return self.jail.split(rel)
        except MemoryValidationError as err:
            raise InvalidPath(err.message, path=afi_path) from None

    @contextlib.contextmanager
    def _folder(self, rel: str, afi_path: str, *, create: bool = False) -> Iterator[int]:
        """The folder's descriptor; a missing folder is NotFound, a file on the way Conflict."""
        try:
            with self.jail.folder(rel, create=create) as fd:
                yield fd
        except MemoryValidationError as err:
            raise InvalidPath(err.message, path=afi_path) from None
        except FileNotFoundError:
            raise NotFound("the parent folder does not exist", path=afi_path) from None
        except (NotADirectoryError, FileExistsError):
            raise Conflict("a parent of this path is a file, not a folder", path=afi_path) from None

    def _leaf(self, parent: str, name: str, afi_path: str, *, symlink_ok: bool = False) -> os.stat_result | None:
        """The stat of ``name`` in ``parent`` itself (None when it or a folder on the way is absent).

        A symlink is refused (InvalidPath) unless ``symlink_ok``: no write may go through one.
        """
        try:
            with self._folder(parent, afi_path) as folder:
                try:
                    st = os.stat(name, dir_fd=folder, follow_symlinks=False)
                except FileNotFoundError:
                    return None
        except (NotFound, Conflict):  # a folder on the way is missing, or is a file
            return None
        if stat_mod.S_ISLNK(st.st_mode) and not symlink_ok:
            joined = f"{parent}/{name}" if parent else name
            raise InvalidPath(self.jail.symlink_refused(joined).message, path=afi_path)
        return st

    def write(
        self, rel: str, afi_path: str, data: bytes, *, offset: int | None, append: bool, create_only: bool
    ) -> tuple[FileStat, bytes | None]:
        """Write a file (parents created inside the jail); return its stat and its full text when small.

        A whole-file write lands atomically (temp file + rename), so a reader never sees half of it.
        Refusals are decided before any folder is created, so a refused write leaves nothing behind.
        """
        parent, name = self._split(rel, afi_path)
        if not name:
            raise InvalidPath("/files is the workspace folder itself", path=afi_path)
        existing = self._leaf(parent, name, afi_path)
        if existing is not None and stat_mod.S_ISDIR(existing.st_mode):
            raise Conflict("a folder is here; a file cannot overwrite it", path=afi_path)
        if existing is not None and not stat_mod.S_ISREG(existing.st_mode):
            raise InvalidPath("only regular files are written here (this is a device, socket or pipe)", path=afi_path)
        if create_only and existing is not None:
            raise Conflict("the file exists and create_only was asked", path=afi_path)
        with self._folder(parent, afi_path, create=True) as folder:
            if append or (offset is not None and existing is not None):
                flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
                flags |= os.O_APPEND | os.O_CREAT if append else 0
                fd = os.open(name, flags, 0o644, dir_fd=folder)
                try:
                    _write_all(fd, data, None if append else offset or 0)
                finally:
                    os.close(fd)
            else:
                self._replace_at(folder, name, b"\x00" * offset + data if offset else data)
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        full = self._index_path(rel)
        return _file_stat(name, st), full

    @staticmethod
    def _replace_at(folder: int, name: str, data: bytes) -> None:
        tmp = f".afi-tmp-{uuid.uuid4().hex}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder)
            try:
                _write_all(fd, data, None)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)
            raise

    def mkdir(self, rel: str, afi_path: str, *, parents: bool) -> FileStat:
        parent, name = self._split(rel, afi_path)
        if not name or self._leaf(parent, name, afi_path, symlink_ok=True) is not None:
            raise Conflict("this path already exists", path=afi_path)
        try:
            with self._folder(parent, afi_path, create=parents) as folder:
                try:
                    os.mkdir(name, 0o777, dir_fd=folder)  # the umask decides, as for mkdir(1)
                except FileExistsError:
                    raise Conflict("this path already exists", path=afi_path) from None
                return _file_stat(name, os.stat(name, dir_fd=folder, follow_symlinks=False))
        except NotFound:
            raise NotFound("the parent folder does not exist (use parents to create it)", path=afi_path) from None

    def delete(self, rel: str, afi_path: str, *, recursive: bool) -> list[str]:
        """Delete a file or folder; return the workspace paths of the files removed."""
        parent, name = self._split(rel, afi_path)
        if not name:
            raise InvalidPath("/files itself cannot be deleted", path=afi_path)
        st = self._leaf(parent, name, afi_path, symlink_ok=True)
        if st is None:
            raise NotFound("no such file or folder", path=afi_path)
        is_dir = stat_mod.S_ISDIR(st.st_mode)
        removed = [p for p, _ in self._walk(rel)] if is_dir else [rel]
        with self._folder(parent, afi_path) as folder:
            try:
                if not is_dir:
                    os.unlink(name, dir_fd=folder)
                else:
                    os.rmdir(name, dir_fd=folder)
            except FileNotFoundError:
                raise NotFound("no such file or folder", path=afi_path) from None
            except OSError as err:
                if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):  # POSIX allows either
                    raise
                if not recursive:
                    raise Conflict("the folder is not empty (delete it recursively)", path=afi_path) from None
                shutil.rmtree(name, dir_fd=folder)
        self._forget_paths([rel], prefix=is_dir)
        return removed

    def move(
        self, src_rel: str, src: str, dst_rel: str, dst: str, *, overwrite: bool
    ) -> tuple[FileStat, list[tuple[str, str]]]:
        """Rename a file or folder; return its new stat and the (old, new) workspace paths of moved files."""
        src_parent, src_name = self._split(src_rel, src)
        dst_parent, dst_name = self._split(dst_rel, dst)
        if not src_name or not dst_name:
            raise InvalidPath("/files itself cannot be moved or replaced", path=src)
        st = self._leaf(src_parent, src_name, src, symlink_ok=True)
        if st is None:
            raise NotFound("no such file or folder", path=src)
        if dst_rel == src_rel:
            return _file_stat(dst_name, st), []
        if dst_rel.startswith(src_rel + "/"):
            raise InvalidPath("a folder cannot be moved inside itself", path=dst)
        target = self._leaf(dst_parent, dst_name, dst)
        if target is not None:
            if not overwrite:
                raise Conflict("the destination exists (ask to overwrite)", path=dst)
            if stat_mod.S_ISDIR(target.st_mode) and not stat_mod.S_ISDIR(st.st_mode):
                raise Conflict("a folder is at the destination; a file cannot replace it", path=dst)
        is_dir = stat_mod.S_ISDIR(st.st_mode)
        moved = [(p, dst_rel + p[len(src_rel) :]) for p, _ in self._walk(src_rel)] if is_dir else [(src_rel, dst_rel)]
        with self._folder(src_parent, src) as src_folder, self._folder(dst_parent, dst, create=True) as dst_folder:
            try:
                os.replace(src_name, dst_name, src_dir_fd=src_folder, dst_dir_fd=dst_folder)
            except OSError as err:
                raise Conflict(f"cannot move here: {err.strerror}", path=dst) from None
            landed = os.stat(dst_name, dir_fd=dst_folder, follow_symlinks=False)
        self._forget_paths([src_rel], prefix=is_dir)
        for _, new in moved:
            with contextlib.suppress(OSError):  # the move is done; a file vanishing meanwhile is not indexed
                self._index_path(new)
        return _file_stat(dst_name, landed), moved

    # -- index -----------------------------------------------------------------------------

    def _walk(self, rel: str) -> Iterator[tuple[str, os.stat_result]]:
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
                            if stat_mod.S_ISREG(st.st_mode) and not name.startswith(".afi-tmp-"):
                                yield base + name, st
        except (MemoryValidationError, FileNotFoundError, NotADirectoryError):
            return

    def _index_path(self, rel: str) -> bytes | None:
        """Index one file; return its bytes when they were read (small files)."""
        data: bytes | None = None
        text = ""
        try:
            fd = self.jail.open(rel, os.O_RDONLY | os.O_NONBLOCK)
        except MemoryValidationError:  # a symlink is never read or indexed
            self._forget_paths([rel], prefix=False)
            return None
        try:
            st = os.fstat(fd)
            if not stat_mod.S_ISREG(st.st_mode):
                self._forget_paths([rel], prefix=False)  # a special file is never read or indexed
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
            for rel, st in self._walk(""):
                if known.pop(rel, None) != (st.st_size, st.st_mtime_ns):
                    self._index_path(rel)
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


def _shown_link(link: str) -> str | None:
    """Only a relative symlink target that stays inside the jail is shown; others would leak host paths."""
    return link if not link.startswith("/") and ".." not in link.split("/") else None


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
