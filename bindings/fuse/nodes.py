"""The FUSE binding's inode table: AFI paths to inode numbers, with the entries last seen for them.

Inodes are path-based: one path keeps one inode number while the kernel knows it, so a note that is
rewritten (or deleted and made again) elsewhere stays the same file to the kernel. Entries are cached
while the store's change token stays the same (or, without a token, for a short time), so ``lookup``
and ``getattr`` after a listing cost no provider call.

The table holds the root, the nodes the kernel was told about (a lookup, create or mkdir reply, or a
readdirplus entry it was handed: ``lookups`` counts them until ``forget`` gives them back), and nodes an
open handle uses. A node is made only when it is about to be handed to the kernel; one that was not
handed over after all is :meth:`Inodes.discard`-ed at once, so failed lookups and listings read only in
part leave nothing behind in a mount that runs for weeks.
"""

from __future__ import annotations

import errno
import functools
import json
import stat
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import datetime

import pyfuse3

from afi.model import Entry, dump
from afi.paths import is_within, join, parent

__all__ = [
    "CONTROL_PATHS",
    "NOT_STORED",
    "NOT_STORED_PATH",
    "SEARCH_PATH",
    "Inodes",
    "Node",
    "attributes",
    "filesystem_stats",
    "xattrs",
]

SEARCH_PATH = "/.afi/search"
NOT_STORED_PATH = "/.afi/not-stored"  # lists the files held at their paths because the store refused them
NOT_STORED = "x-not-stored"  # the entry attribute of a held file: why the store refused it
CONTROL_PATHS = frozenset({SEARCH_PATH, NOT_STORED_PATH})  # made by the mount, answered afresh each time
_TOKEN_EVERY = 0.1  # seconds between two looks at the change token


@dataclass
class Node:
    """One inode: its AFI path, the entry last seen, when, and under which change token."""

    ino: int
    path: str
    entry: Entry | None = None
    seen_at: float = 0.0
    token: object = None
    lookups: int = 0  # how many times the kernel was handed this node and has not forgotten it
    opened: int = 0  # open file handles on it
    page_etag: str | None = None  # the etag of the bytes the kernel may hold in its page cache


class Inodes:
    """Given AFI paths, hand out inode numbers, and keep the entries seen for them.

    Args:
        root: the AFI path the mount's root shows (``--subtree``).
        change_token: returns a value that changes whenever the store changes; ``None`` means
            entries are trusted for ``ttl`` seconds only.
        ttl: how long an entry is trusted without a change token.
    """

    def __init__(self, root: str, change_token: Callable[[], Hashable] | None = None, ttl: float = 0.5) -> None:
        self.root = root
        self._by_ino: dict[int, Node] = {pyfuse3.ROOT_INODE: Node(pyfuse3.ROOT_INODE, root, lookups=1)}
        self._by_path: dict[str, int] = {root: pyfuse3.ROOT_INODE}
        self._next = pyfuse3.ROOT_INODE + 1
        self._change_token = change_token
        self._ttl = ttl
        self._token: Hashable = change_token() if change_token else None
        self._watched = self._token  # what the watcher saw last (handlers refresh _token on their own)
        self._token_at = time.monotonic()

    # -- paths and numbers -----------------------------------------------------------------

    def node(self, ino: int) -> Node:
        """Given an inode number, return its node (ENOENT when the kernel's number is unknown)."""
        found = self._by_ino.get(ino)
        if found is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return found

    def __len__(self) -> int:
        """How many nodes the table holds (the root included)."""
        return len(self._by_ino)

    def get(self, ino: int) -> Node | None:
        return self._by_ino.get(ino)

    def for_path(self, path: str) -> Node:
        """Given an AFI path, return its node, making one when the path is new.

        A node made here is about to be handed to the kernel: the caller counts it (``lookups += 1``)
        once the kernel has it, or calls :meth:`discard` when it was not handed over after all.
        """
        ino = self._by_path.get(path)
        if ino is not None:
            return self._by_ino[ino]
        node = Node(self._next, path)
        self._next += 1
        self._by_ino[node.ino] = node
        self._by_path[path] = node.ino
        return node

    def child(self, parent_ino: int, name: bytes) -> str:
        """Given a folder's inode number and a name in it (``.`` and ``..`` too), return the AFI path."""
        path = self.node(parent_ino).path
        text = name.decode("utf-8", "surrogateescape")
        if text == ".":
            return path
        if text == "..":
            return path if path == self.root else parent(path)
        return join(path, text)

    def new_child(self, parent_ino: int, name: bytes) -> str:
        """Given a folder's inode number and a name to make in it, return the AFI path.

        AFI paths are UTF-8 text: a name that is not is refused with EILSEQ ("Invalid or incomplete
        multibyte or wide character") before anything is made, rather than kept where no door can reach it.
        """
        try:
            name.decode("utf-8")
        except UnicodeDecodeError:
            raise pyfuse3.FUSEError(errno.EILSEQ) from None
        return self.child(parent_ino, name)

    def known(self, path: str) -> Node | None:
        ino = self._by_path.get(path)
        return None if ino is None else self._by_ino[ino]

    def forget(self, ino: int, count: int) -> None:
        node = self._by_ino.get(ino)
        if node is None or ino == pyfuse3.ROOT_INODE:
            return
        node.lookups -= count
        self.discard(node)

    def discard(self, node: Node) -> None:
        """Drop ``node`` unless the kernel knows it, a handle has it open, or it is the root."""
        if node.lookups > 0 or node.opened > 0 or node.ino == pyfuse3.ROOT_INODE:
            return
        if self._by_ino.get(node.ino) is node:
            del self._by_ino[node.ino]
        if self._by_path.get(node.path) == node.ino:
            del self._by_path[node.path]

    def moved(self, source: str, destination: str) -> None:
        """Repoint every node at or below ``source`` to the same place below ``destination``."""
        gone = self._by_path.pop(destination, None)
        if gone is not None and gone in self._by_ino:
            self._by_ino[gone].entry = None
            self.discard(self._by_ino[gone])  # no path leads to it now: it stays only while held
        for path in [p for p in self._by_path if is_within(p, source)]:
            ino = self._by_path.pop(path)
            node = self._by_ino[ino]
            node.path = destination + path[len(source) :]
            node.entry = None
            self._by_path[node.path] = ino

    # -- cached entries --------------------------------------------------------------------

    def current_token(self) -> Hashable:
        if self._change_token is not None and time.monotonic() - self._token_at >= _TOKEN_EVERY:
            self._token = self._change_token()
            self._token_at = time.monotonic()
        return self._token

    def fresh(self, node: Node) -> Entry | None:
        """Given a node, return its cached entry while it can be trusted, else ``None``."""
        if node.entry is None:
            return None
        if self._change_token is not None:
            return node.entry if node.token == self.current_token() else None
        return node.entry if time.monotonic() - node.seen_at < self._ttl else None

    def remember(self, node: Node, entry: Entry, *, token: Hashable = None, seen_at: float | None = None) -> None:
        """Cache ``entry`` on ``node``, as seen now, or under the ``token`` and time of the listing it came from."""
        node.entry = entry
        node.seen_at = time.monotonic() if seen_at is None else seen_at
        node.token = self.current_token() if token is None else token

    def stale(self, path: str) -> None:
        """Drop the cached entry of ``path`` (after a change made through the mount)."""
        node = self.known(path)
        if node is not None:
            node.entry = None

    def looked_up(self) -> list[int]:
        """The inode numbers the kernel holds."""
        return [ino for ino, node in self._by_ino.items() if node.lookups > 0]

    def token_changed(self) -> bool:
        """Look at the change token now; return True when it moved since the last look."""
        if self._change_token is None:
            return False
        before = self._watched
        self._token = self._watched = self._change_token()
        self._token_at = time.monotonic()
        return bool(self._watched != before)

    @property
    def watched(self) -> bool:
        return self._change_token is not None


@functools.lru_cache(maxsize=1 << 16)
def _ns(moment: str) -> int:
    return int(datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp() * 1e9)


def attributes(
    ino: int, entry: Entry, *, read_only: bool, timeout: float, size: int | None = None
) -> pyfuse3.EntryAttributes:
    """Given an inode number and its AFI entry, return the attributes the kernel sees."""
    attr = pyfuse3.EntryAttributes()
    writable = "w" in str(entry.attributes.get("permissions", "rw")) and not read_only
    if entry.type == "directory":
        attr.st_mode = stat.S_IFDIR | (0o755 if writable else 0o555)
        attr.st_nlink = 2
    elif entry.type == "symlink":
        attr.st_mode = stat.S_IFLNK | 0o777
        attr.st_nlink = 1
    else:
        attr.st_mode = stat.S_IFREG | (0o644 if writable else 0o444)
        attr.st_nlink = 1
    attr.st_ino = ino
    attr.st_size = entry.size if size is None else size
    attr.st_blksize = 4096
    attr.st_blocks = (attr.st_size + 511) // 512
    attr.st_mtime_ns = _ns(entry.mtime)
    attr.st_ctime_ns = _ns(entry.ctime)
    attr.st_atime_ns = attr.st_mtime_ns
    attr.st_uid = _OWNER[0]
    attr.st_gid = _OWNER[1]
    attr.entry_timeout = timeout
    attr.attr_timeout = timeout
    return attr


def _owner() -> tuple[int, int]:
    import os

    return os.getuid(), os.getgid()


_OWNER = _owner()


def xattrs(entry: Entry) -> dict[bytes, bytes]:
    """The extended attributes an entry shows: its content type, its etag (when it has one), the whole Entry as
    JSON, and for a file held because the store refused it, why (``user.afi.error``)."""
    values = {b"user.afi.content_type": entry.content_type.encode()}
    if entry.etag is not None:
        values[b"user.afi.etag"] = entry.etag.encode()
    values[b"user.afi.entry"] = json.dumps(dump(entry)).encode()
    refused = entry.attributes.get(NOT_STORED)
    if refused is not None:
        values[b"user.afi.error"] = f"not stored: {refused}".encode()
    return values


def filesystem_stats() -> pyfuse3.StatvfsData:
    """What ``statfs`` answers: 4 KiB blocks, and room that never runs out (the provider refuses past its quotas)."""
    data = pyfuse3.StatvfsData()
    data.f_bsize = data.f_frsize = 4096
    data.f_blocks = data.f_bfree = data.f_bavail = 1 << 24
    data.f_files = data.f_ffree = data.f_favail = 1 << 24
    data.f_namemax = 255
    return data
