"""A workspace folder's shown names in order, read once and kept while the folder stays as it was, and
the files below a folder walked in path order from any path on.

Listing a page of a folder of 100,000 files must not cost the whole folder: the names are read
(``os.scandir``, no ``stat``) and sorted once, then each page is a bisection to its cursor and one
``stat`` per entry it shows. A big folder's sorted names are kept, keyed by the folder's device
and inode, while its modification and change times, size and link count are those read before its
names were; any entry added, removed or renamed changes its modification time. A folder changed
within :data:`SETTLE_NS` of being read is not kept, as git does for its index: a time stamp is as
coarse as the kernel's clock tick, so a change in that same tick could keep the time it had.

The same sorted names let the file index walk a folder's files in the order of their paths (a
folder ``a`` comes after ``a.txt``: ``a/…`` sorts after ``a.txt``) starting at any path, so a
search catches up with the disk a slice at a time (:meth:`~.file_index.FileIndex.catch_up`).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import stat as stat_mod
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["KEEP_MIN_NAMES", "SETTLE_NS", "FolderNames", "shown_name"]

KEEP_MIN_NAMES = 1000  # a smaller folder is read again each time: that costs less than keeping it
KEEP_MAX_NAMES = 2_000_000  # across the folders kept (about 150 bytes a name)
SETTLE_NS = 2_000_000_000
_OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def shown_name(name: str, temp_prefix: str) -> bool:
    """Whether a name on disk is shown in the tree: not a temporary file, and valid UTF-8 (a name that is
    not, made on disk behind the provider's back, could not be named in a request or a JSON answer)."""
    if name.startswith(temp_prefix):
        return False
    return name.isascii() or not any("\udc80" <= c <= "\udcff" for c in name)


@dataclass(frozen=True)
class _Folder:
    stamp: tuple[int, int, int, int]
    names: list[str]  # in name order: what a listing shows
    keys: list[str]  # in path order: a folder's name ends with "/"


class FolderNames:
    """The sorted shown names of a space's folders, the big ones kept while unchanged (thread-safe)."""

    def __init__(self, temp_prefix: str) -> None:
        self._temp_prefix = temp_prefix
        self._kept: OrderedDict[tuple[int, int], _Folder] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self.reads = 0  # folders read from disk (a kept one is not)

    def sorted_names(self, fd: int) -> list[str]:
        """Given an open folder, return its shown names in order (a list the caller must not change)."""
        return self._folder(fd).names

    def files_in_order(self, fd: int, base: str, after: str) -> Iterator[tuple[str, os.stat_result]]:
        """Given an open folder and its workspace path ``base`` ("" or ending with "/"), yield (path,
        stat) of each regular file below it, in path order, from the path ``after`` on (itself
        included); symlinks are not followed, and a folder that is not shown is not entered."""
        first, _, rest = after.partition("/")
        keys = self._folder(fd).keys
        if rest:  # ``after`` lies inside the folder ``first``: the rest of it, then what follows it
            at = bisect.bisect_left(keys, first + "/")
            if at < len(keys) and keys[at] == first + "/":
                yield from self._below(fd, base, first, rest)
                at += 1
        else:
            at = bisect.bisect_left(keys, first)
        for key in keys[at:]:
            if key.endswith("/"):
                yield from self._below(fd, base, key[:-1], "")
                continue
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(key, dir_fd=fd, follow_symlinks=False)
                if stat_mod.S_ISREG(st.st_mode):
                    yield base + key, st

    def _below(self, fd: int, base: str, name: str, after: str) -> Iterator[tuple[str, os.stat_result]]:
        try:
            sub = os.open(name, _OPEN_FOLDER, dir_fd=fd)
        except OSError:  # gone, or swapped for a file or a symlink meanwhile
            return
        try:
            yield from self.files_in_order(sub, f"{base}{name}/", after)
        finally:
            os.close(sub)

    def _folder(self, fd: int) -> _Folder:
        st = os.fstat(fd)
        key, stamp = (st.st_dev, st.st_ino), (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_nlink)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept.stamp == stamp:
                self._kept.move_to_end(key)
                return kept
        read_at = time.time_ns()
        with os.scandir(fd) as it:
            found = [(e.name, e.is_dir(follow_symlinks=False)) for e in it if shown_name(e.name, self._temp_prefix)]
        self.reads += 1
        folder = _Folder(
            stamp, sorted(name for name, _ in found), sorted(name + "/" if is_dir else name for name, is_dir in found)
        )
        settled = read_at - max(st.st_mtime_ns, st.st_ctime_ns) > SETTLE_NS
        if settled and KEEP_MIN_NAMES <= len(found) <= KEEP_MAX_NAMES:
            self._keep(key, folder)
        return folder

    def _keep(self, key: tuple[int, int], folder: _Folder) -> None:
        with self._lock:
            old = self._kept.pop(key, None)
            self._held -= len(old.names) if old is not None else 0
            self._kept[key] = folder
            self._held += len(folder.names)
            while self._held > KEEP_MAX_NAMES and len(self._kept) > 1:
                _, dropped = self._kept.popitem(last=False)
                self._held -= len(dropped.names)
