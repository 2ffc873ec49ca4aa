"""A space's jailed workspace: real files under ``<root>/<space>``, limits on what they may hold, and
their text index (:mod:`.file_index`).

Every path goes through :class:`~.jail.FileJail` before any I/O; the caller (the provider) holds the
space's write lock around every write, so a check and the write it guards are one step.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import os
import shutil
import stat as stat_mod
from collections.abc import Callable, Iterator
from pathlib import Path

from afi.errors import AfiError, Conflict, Forbidden, InvalidPath, NotFound, TooLarge
from afi.storage.database import Database

from ..fabric.errors import MemoryValidationError
from .durable import replace_at, write_all
from .file_index import INDEX_MAX_BYTES, TEMP_PREFIX, FileIndex, Opened, RefreshBudget
from .filestat import FileStat, file_stat
from .folders import FolderNames
from .jail import FileJail
from .quota import WorkspaceLimits, charged, charged_after, check_limits, size_after

__all__ = ["INDEX_MAX_BYTES", "TEMP_PREFIX", "FileStat", "Workspace", "WorkspaceLimits"]

MAX_READ_BYTES = 256 << 20


def is_reserved(rel: str) -> bool:
    """True when a workspace path names (or lies inside) a temporary file of the workspace's own."""
    return any(part.startswith(TEMP_PREFIX) for part in rel.split("/"))


class Workspace:
    """One space's files: jailed disk operations plus the text index (``rel`` paths, "" is the root)."""

    def __init__(self, root: Path, space: str, database: Database, limits: WorkspaceLimits | None = None) -> None:
        self.space = space
        Path(root).expanduser().mkdir(parents=True, exist_ok=True)
        self.jail = FileJail(root, space=space, create=False)  # the first write makes the space's folder
        self.limits = limits or WorkspaceLimits()
        self.folders = FolderNames(TEMP_PREFIX)
        self.index = FileIndex(space, self.jail, database, self.folders)

    # -- reads -----------------------------------------------------------------------------

    def stat(self, rel: str, afi_path: str) -> FileStat:
        parent, name = self._split(rel, afi_path)
        if not name:
            try:
                return file_stat(self.jail.root.name, self.jail.root_stat())
            except MemoryValidationError as err:
                raise InvalidPath(err.message, path=afi_path) from None
        if is_reserved(rel):
            raise NotFound("no such file or folder", path=afi_path)
        st = self._leaf(parent, name, afi_path, symlink_ok=True)
        if st is None:
            raise NotFound("no such file or folder", path=afi_path)
        link = None
        if stat_mod.S_ISLNK(st.st_mode):
            with contextlib.suppress(OSError, AfiError), self._folder(parent, afi_path) as folder:
                link = _shown_link(os.readlink(name, dir_fd=folder))
        return file_stat(name, st, link)

    def list_page(self, rel: str, afi_path: str, *, after: str | None, limit: int, prefix: str = "",
                  matches: Callable[[str], bool] | None = None) -> list[FileStat]:  # fmt: skip
        """Given a folder, return up to ``limit`` of its children in name order: those named after
        ``after`` (all when None), starting with ``prefix``, that ``matches`` accepts (the workspace's
        own temporary files left out). A page costs its own entries and the names it passes over:
        the folder's sorted names are kept (:mod:`.folders`)."""
        if is_reserved(rel):
            raise NotFound("no such folder", path=afi_path)
        try:
            fd = self.jail.open(rel, os.O_RDONLY | os.O_DIRECTORY)
        except MemoryValidationError as err:
            raise InvalidPath(err.message, path=afi_path) from None
        except FileNotFoundError:
            if self.jail.is_root(rel) and not self.jail.root_exists:
                return []  # a space nothing was written to yet: an empty /files
            raise NotFound("no such folder", path=afi_path) from None
        except NotADirectoryError:
            raise InvalidPath("this is a file, not a folder: read it instead of listing it", path=afi_path) from None
        children: list[FileStat] = []
        try:
            names = self.folders.sorted_names(fd)
            at = bisect.bisect_left(names, prefix)
            if after is not None:
                at = max(at, bisect.bisect_right(names, after))
            while at < len(names) and len(children) < limit and names[at].startswith(prefix):
                name = names[at]
                at += 1
                if matches is not None and not matches(name):
                    continue
                try:
                    children.append(file_stat(name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
                except FileNotFoundError:  # removed since the names were read
                    continue
        finally:
            os.close(fd)
        return children

    def read(self, rel: str, afi_path: str, offset: int, length: int | None) -> tuple[bytes, FileStat]:
        if is_reserved(rel):
            raise NotFound("no such file", path=afi_path)
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
            _refuse_linked(st, afi_path)
            want = max(0, st.st_size - offset) if length is None else length
            if want > MAX_READ_BYTES:
                raise TooLarge(f"read at most {MAX_READ_BYTES} bytes per call; use offset and length", path=afi_path)
            # Past the end there is nothing to read (and pread refuses an offset near 2**63 outright).
            data = os.pread(fd, want, offset) if want and offset < st.st_size else b""
        finally:
            os.close(fd)
        return data, file_stat(Path(rel).name, st)

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
        """The folder's descriptor; a missing folder is NotFound, a file on the way Conflict; with
        ``create``, the missing folders are made (the space's own first)."""
        try:
            if create:
                self.jail.ensure_root()
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

        A whole-file write lands atomically (temp file + rename), so a reader never sees half of it; a
        write past the end leaves a hole (sparse where the file system allows), so nothing is allocated
        in proportion to an offset. Refusals (limits included) are decided before any folder is created,
        so a refused write leaves nothing behind. The caller holds the space's write lock.
        """
        parent, name = self._split(rel, afi_path)
        if not name:
            raise InvalidPath("/files is the workspace folder itself", path=afi_path)
        if is_reserved(rel):
            raise InvalidPath(
                f"names starting with {TEMP_PREFIX} are the workspace's own temporary files", path=afi_path
            )
        existing = self._leaf(parent, name, afi_path)
        if existing is not None and stat_mod.S_ISDIR(existing.st_mode):
            raise Conflict("a folder is here; a file cannot overwrite it", path=afi_path)
        if existing is not None and not stat_mod.S_ISREG(existing.st_mode):
            raise InvalidPath("only regular files are written here (this is a device, socket or pipe)", path=afi_path)
        if create_only and existing is not None:
            raise Conflict("the file exists and create_only was asked", path=afi_path)
        in_place = append or (offset is not None and existing is not None)
        if in_place and existing is not None:
            _refuse_linked(existing, afi_path)
        check_limits(
            self.limits,
            afi_path,
            size=size_after(existing, data, offset, append),
            before=charged(existing) if existing is not None else 0,
            after=charged_after(existing, data, offset, append),
            used_elsewhere=self.index.used_bytes(besides=rel),
        )
        with self._folder(parent, afi_path, create=True) as folder:
            if in_place:
                flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
                flags |= os.O_APPEND | os.O_CREAT if append else 0
                fd = os.open(name, flags, 0o644, dir_fd=folder)
                try:
                    _refuse_linked(os.fstat(fd), afi_path)  # the file this descriptor names, not a path's
                    write_all(fd, data, None if append else offset or 0)
                finally:
                    os.close(fd)
            else:
                replace_at(folder, name, data, offset or 0)
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
        full = self.index.index_path(rel)
        return file_stat(name, st), full

    def sweep_temporary_files(self) -> int:
        """Remove the temporary files a crashed writer left behind; return how many.

        The caller holds the space's write lock, which every writer holds for its temporary file's
        whole life, so any temporary file found now is an orphan.
        """
        removed = 0
        try:
            with self.jail.folder("") as top:
                for _dirpath, _dirs, names, dirfd in os.fwalk(".", dir_fd=top):
                    for name in names:
                        if name.startswith(TEMP_PREFIX):
                            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                                os.unlink(name, dir_fd=dirfd)
                                removed += 1
        except (MemoryValidationError, FileNotFoundError, NotADirectoryError):
            return removed
        return removed

    def mkdir(self, rel: str, afi_path: str, *, parents: bool) -> FileStat:
        parent, name = self._split(rel, afi_path)
        if is_reserved(rel):
            raise InvalidPath(
                f"names starting with {TEMP_PREFIX} are the workspace's own temporary files", path=afi_path
            )
        if not name or self._leaf(parent, name, afi_path, symlink_ok=True) is not None:
            raise Conflict("this path already exists", path=afi_path)
        if not parent:
            self.jail.ensure_root()  # /files itself always exists, whether or not its folder was made yet
        try:
            with self._folder(parent, afi_path, create=parents) as folder:
                try:
                    os.mkdir(name, 0o777, dir_fd=folder)  # the umask decides, as for mkdir(1)
                except FileExistsError:
                    raise Conflict("this path already exists", path=afi_path) from None
                return file_stat(name, os.stat(name, dir_fd=folder, follow_symlinks=False))
        except NotFound:
            raise NotFound("the parent folder does not exist (use parents to create it)", path=afi_path) from None

    def delete(self, rel: str, afi_path: str, *, recursive: bool) -> list[str]:
        """Delete a file or folder; return the workspace paths of the files removed."""
        parent, name = self._split(rel, afi_path)
        if not name:
            raise InvalidPath("/files itself cannot be deleted", path=afi_path)
        if is_reserved(rel):
            raise NotFound("no such file or folder", path=afi_path)
        st = self._leaf(parent, name, afi_path, symlink_ok=True)
        if st is None:
            raise NotFound("no such file or folder", path=afi_path)
        is_dir = stat_mod.S_ISDIR(st.st_mode)
        removed = [p for p, _ in self.index.walk(rel)] if is_dir else [rel]
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
        self.index.forget_paths([rel], prefix=is_dir)
        return removed

    def move(
        self, src_rel: str, src: str, dst_rel: str, dst: str, *, overwrite: bool
    ) -> tuple[FileStat, list[tuple[str, str]]]:
        """Rename a file or folder; return its new stat and the (old, new) workspace paths of moved files."""
        src_parent, src_name = self._split(src_rel, src)
        dst_parent, dst_name = self._split(dst_rel, dst)
        if not src_name or not dst_name:
            raise InvalidPath("/files itself cannot be moved or replaced", path=src)
        if is_reserved(src_rel):
            raise NotFound("no such file or folder", path=src)
        if is_reserved(dst_rel):
            raise InvalidPath(f"names starting with {TEMP_PREFIX} are the workspace's own temporary files", path=dst)
        st = self._leaf(src_parent, src_name, src, symlink_ok=True)
        if st is None:
            raise NotFound("no such file or folder", path=src)
        if dst_rel == src_rel:
            return file_stat(dst_name, st), []
        if dst_rel.startswith(src_rel + "/"):
            raise InvalidPath("a folder cannot be moved inside itself", path=dst)
        target = self._leaf(dst_parent, dst_name, dst)
        if target is not None:
            if not overwrite:
                raise Conflict("the destination exists (ask to overwrite)", path=dst)
            if stat_mod.S_ISDIR(target.st_mode) and not stat_mod.S_ISDIR(st.st_mode):
                raise Conflict("a folder is at the destination; a file cannot replace it", path=dst)
        is_dir = stat_mod.S_ISDIR(st.st_mode)
        moved = (
            [(p, dst_rel + p[len(src_rel) :]) for p, _ in self.index.walk(src_rel)] if is_dir else [(src_rel, dst_rel)]
        )
        with self._folder(src_parent, src) as src_folder, self._folder(dst_parent, dst, create=True) as dst_folder:
            try:
                os.replace(src_name, dst_name, src_dir_fd=src_folder, dst_dir_fd=dst_folder)
            except OSError as err:
                raise Conflict(f"cannot move here: {err.strerror}", path=dst) from None
            landed = os.stat(dst_name, dir_fd=dst_folder, follow_symlinks=False)
        self.index.forget_paths([src_rel], prefix=is_dir)
        for _, new in moved:
            with contextlib.suppress(OSError):  # the move is done; a file vanishing meanwhile is not indexed
                self.index.index_path(new)
        return file_stat(dst_name, landed), moved

    # -- index -----------------------------------------------------------------------------

    # -- the index, for search -------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> None:
        """Bring the index in line with the disk (edits made behind the provider's back)."""
        self.index.refresh(force=force)

    def catch_up(self, within: str, after: str, budget: RefreshBudget | None) -> str | None:
        """Bring the index in line for the files under ``within`` from ``after`` on, within ``budget``;
        return the first path it did not get to (None: it got to the end)."""
        return self.index.catch_up(within, after, budget)

    def candidates(self, literal: str | None) -> list[tuple[int, str]]:
        """Return (rowid, workspace path) of indexed files that may contain ``literal`` (all when None)."""
        return self.index.candidates(literal)

    def texts_by_rowid(self, rowids: list[int]) -> dict[int, str]:
        """The indexed texts of the given rows."""
        return self.index.texts_by_rowid(rowids)

    def unindexed(self) -> list[tuple[int, str]]:
        """Return (rowid, workspace path) of the files grep reads from disk (their text is not indexed)."""
        return self.index.unindexed()

    def opened(self, rel: str) -> contextlib.AbstractContextManager[Opened | None]:
        """The file ``rel`` open for reading (None when gone or never read), closed afterwards."""
        return self.index.opened(rel)

    def change_token(self) -> int:
        """Grows with every change to this space's file index."""
        return self.index.change_token()


def _shown_link(link: str) -> str | None:
    """Only a relative symlink target that stays inside the jail is shown; others would leak host paths."""
    return link if not link.startswith("/") and ".." not in link.split("/") else None


def _refuse_linked(st: os.stat_result, afi_path: str) -> None:
    """Refuse a regular file with other hard links: its bytes may belong to a file outside the jail."""
    if stat_mod.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise Forbidden(
            f"this file has {st.st_nlink} hard links, and one may lie outside the workspace: it is neither read "
            "nor changed in place (write it whole to replace it with a file of its own)",
            path=afi_path,
        )
