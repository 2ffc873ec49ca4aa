"""The floor for the FUSE benchmark: a folder served read-only by the least a pyfuse3 file system can do.

Every name and attribute is read once at start and answered from memory; open hands the kernel an
OS file descriptor and keeps its page cache, read is one ``pread``, flush and release do nothing
more than they must. What the tools then cost over native is what pyfuse3 on trio costs by itself:
the kernel round trips (open, flush, release per file; readdirplus per folder page), not the AFI
binding or the provider.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pyfuse3
import trio

__all__ = ["FloorFS", "serve_floor"]

_TIMEOUT = 10.0  # seconds, as ``afi mount`` defaults to


class FloorFS(pyfuse3.Operations):
    """Given a folder, serve its tree read-only, names and attributes answered from memory."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self._paths: dict[int, Path] = {pyfuse3.ROOT_INODE: folder}
        self._attrs: dict[int, pyfuse3.EntryAttributes] = {}
        self._children: dict[int, list[tuple[bytes, int]]] = {}
        self._next = pyfuse3.ROOT_INODE + 1
        self._scan(pyfuse3.ROOT_INODE)

    def _scan(self, ino: int) -> None:
        path = self._paths[ino]
        self._attrs[ino] = _attributes(ino, os.lstat(path))
        if not path.is_dir():
            return
        children: list[tuple[bytes, int]] = []
        for name in sorted(os.listdir(path)):
            child = self._next
            self._next += 1
            self._paths[child] = path / name
            children.append((os.fsencode(name), child))
            self._scan(child)
        self._children[ino] = children

    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        return self._attrs[inode]

    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        for child_name, child in self._children.get(parent_inode, []):
            if child_name == name:
                return self._attrs[child]
        raise pyfuse3.FUSEError(errno.ENOENT)

    async def opendir(self, inode: int, ctx: Any) -> int:
        return inode

    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        children = self._children[fh]
        for index in range(start_id, len(children)):
            name, child = children[index]
            if not pyfuse3.readdir_reply(token, name, self._attrs[child], index + 1):
                return

    async def releasedir(self, fh: int) -> None:
        return None

    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise pyfuse3.FUSEError(errno.EROFS)
        return pyfuse3.FileInfo(fh=os.open(self._paths[inode], os.O_RDONLY), keep_cache=True)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return os.pread(fh, size, off)

    async def flush(self, fh: int) -> None:
        return None

    async def release(self, fh: int) -> None:
        os.close(fh)

    async def forget(self, inode_list: Any) -> None:
        return None


def _attributes(ino: int, info: os.stat_result) -> pyfuse3.EntryAttributes:
    attr = pyfuse3.EntryAttributes()
    attr.st_ino = ino
    attr.st_mode = (stat.S_IFDIR | 0o555) if stat.S_ISDIR(info.st_mode) else (stat.S_IFREG | 0o444)
    attr.st_nlink = 2 if stat.S_ISDIR(info.st_mode) else 1
    attr.st_size = info.st_size
    attr.st_blksize = 4096
    attr.st_blocks = (info.st_size + 511) // 512
    attr.st_mtime_ns = attr.st_ctime_ns = attr.st_atime_ns = info.st_mtime_ns
    attr.st_uid, attr.st_gid = info.st_uid, info.st_gid
    attr.entry_timeout = attr.attr_timeout = _TIMEOUT
    return attr


def serve_floor(folder: Path, mountpoint: Path) -> None:
    """Mount the floor of ``folder`` at ``mountpoint``; say ``floor mounted``; serve until unmounted."""
    fs = FloorFS(folder)
    options = set(pyfuse3.default_options) | {"fsname=afi-floor", "auto_unmount"}
    pyfuse3.init(fs, str(mountpoint), options)
    try:
        sys.stdout.write("floor mounted\n")
        sys.stdout.flush()
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=True)
