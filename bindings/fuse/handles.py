"""The mount's open handles: what one holds (a read window, a write buffer, a search, a listing) and their table.

A written file is buffered whole and handed to the provider as one ``write`` when it is flushed,
synced or released, so the provider never sees half a note. The search control file keeps its
request and its answer per handle, so two processes searching at once never see each other's.
:class:`Handles` numbers the open handles for the kernel and counts an open file on its inode.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyfuse3
import trio

from afi.errors import AfiError, InvalidPath
from afi.model import Entry, MatchPage, SearchRequest, dump
from afi.paths import is_within

from .nodes import Inodes, Node

__all__ = [
    "SEARCH_USAGE",
    "DirHandle",
    "Fetch",
    "Handle",
    "Handles",
    "ReadHandle",
    "Row",
    "SearchHandle",
    "TextHandle",
    "WriteHandle",
    "render_matches",
]

SEARCH_USAGE = (
    b"afi search: on one open handle, write a JSON request such as\n"
    b'  {"query": "word", "path": "/facts", "limit": 100}\n'
    b'  {"query": {"regex": "^dea?l", "flags": "i"}}   {"query": {"semantic": "what does alice drink"}}\n'
    b'then read from offset 0: one JSON match per line, a {"next_cursor": ...} line when more remain\n'
    b'(with "x-truncated" when the page\'s work budget ran out first), and an empty line at the end.\n'
)


@dataclass
class Fetch:
    """One provider read of a handle's window, in flight or done; other reads it covers wait for it."""

    start: int
    length: int
    done: trio.Event = field(default_factory=trio.Event)
    data: bytes | None = None
    eof: bool = False

    def covers(self, offset: int) -> bool:
        return self.start <= offset < self.start + self.length

    def serve(self, offset: int, size: int) -> bytes | None:
        """Given a read, return its bytes from what this fetch got, or ``None`` when they are not in it."""
        if self.data is None:
            return None
        end = self.start + len(self.data)
        if self.start <= offset and (offset + size <= end or self.eof):
            return self.data[offset - self.start : offset - self.start + size]
        return None


@dataclass
class ReadHandle:
    """A file opened for reading: the window of its bytes fetched last, and the fetches in flight.

    The kernel's readahead sends several reads at once; those that fall in a window already being
    fetched wait for it instead of each fetching (most of) the same bytes again.
    """

    ino: int
    path: str
    window: Fetch | None = None
    fetches: list[Fetch] = field(default_factory=list)

    def serve(self, offset: int, size: int) -> bytes | None:
        """Given a read, return its bytes from the window, or ``None`` when they are not in it."""
        return None if self.window is None else self.window.serve(offset, size)


@dataclass
class WriteHandle:
    """A file opened for writing: the whole new content, loaded on first need, and whether it changed."""

    ino: int
    path: str
    buffer: bytearray | None = None
    dirty: bool = False
    local: bool = False  # made through the mount and not (yet) stored by the provider
    base_etag: str | None = None  # the stored version the buffer was loaded from: the commit's if_match
    appending: bool = False  # opened O_APPEND: every write goes to the end, stored as a provider append
    appended_from: int | None = None  # where the appended bytes start in the buffer (once loaded)
    refused: str | None = None  # why the provider refused what the buffer held when last flushed
    refused_empty: object = None  # the file the mount held when it was refused empty (held at release if unchanged)

    def put(self, offset: int, data: bytes) -> None:
        assert self.buffer is not None
        end = offset + len(data)
        if offset > len(self.buffer):
            self.buffer.extend(b"\x00" * (offset - len(self.buffer)))
        self.buffer[offset:end] = data
        self.dirty = True
        self.refused = self.refused_empty = None

    def truncate(self, size: int) -> None:
        assert self.buffer is not None
        self.appending = False  # no longer an append: the whole content is stored over its base
        if size < len(self.buffer):
            del self.buffer[size:]
        else:
            self.buffer.extend(b"\x00" * (size - len(self.buffer)))
        self.dirty = True


@dataclass
class SearchHandle:
    """An open ``/.afi/search``: the request written so far, and the answer (or error) it got."""

    request: bytearray = field(default_factory=bytearray)
    answer: bytes | None = None
    base: int | None = None  # where the answer starts: 0 (pread from 0), or after the request (a shell's fd)

    def parsed(self) -> SearchRequest | None:
        """Return the request once the bytes written form a whole JSON object, else ``None``.

        Raises:
            InvalidPath: the bytes are JSON but not a valid search request.
        """
        try:
            body = json.loads(self.request.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        except (ValueError, RecursionError):  # a number past Python's digit limit; nesting past the stack
            raise InvalidPath("the search request is nested too deep or holds too long a number") from None
        if not isinstance(body, dict):
            raise InvalidPath('a search request is a JSON object: {"query": ..., "path"?, "limit"?}')
        try:
            return SearchRequest.model_validate(body)
        except ValueError as err:
            raise InvalidPath(f"bad search request: {err}".splitlines()[0]) from None

    def fail(self, err: AfiError) -> None:
        self.answer = (json.dumps({"error": err.to_dict()}) + "\n\n").encode()

    def read(self, offset: int, size: int) -> bytes:
        if self.answer is None:
            if self.request:
                self.fail(InvalidPath("the search request is not complete JSON"))
            else:
                return SEARCH_USAGE[offset : offset + size]
        assert self.answer is not None
        if self.base is None:
            # A shell reads on from where its write left the offset; a program reads from 0.
            self.base = len(self.request) if offset == len(self.request) else 0
        start = max(0, offset - self.base)
        return self.answer[start : start + size]


@dataclass
class TextHandle:
    """An open read-only control file: the text it held when it was opened."""

    data: bytes

    def read(self, offset: int, size: int) -> bytes:
        return self.data[offset : offset + size]


Row = tuple[bytes, Entry, Any]  # a child's name, its entry, and its pyfuse3.EntryAttributes (inode set by readdir)


@dataclass
class DirHandle:
    """An open directory: its children, listed once at opendir, as readdir rows, and when they were listed.

    The rows hold no inode numbers: a child gets its node only when readdir hands it to the kernel.
    """

    rows: list[Row]
    token: Hashable = None  # the change token the listing was made under
    seen_at: float = 0.0  # time.monotonic() of the listing


Handle = ReadHandle | WriteHandle | SearchHandle | TextHandle | DirHandle


class Handles:
    """The open handles, by the number the kernel knows each by; an open file holds its node in the inode table."""

    def __init__(self, inodes: Inodes) -> None:
        self._inodes = inodes
        self._open: dict[int, Handle] = {}
        self._next = 1

    def open(self, handle: Handle) -> int:
        """Given a new handle, return its number."""
        fh = self._next
        self._next += 1
        self._open[fh] = handle
        if isinstance(handle, ReadHandle | WriteHandle):
            node = self._inodes.get(handle.ino)
            if node is not None:
                node.opened += 1
        return fh

    def open_for_write(self, node: Node, flags: int, *, local: bool) -> int:
        """Open ``node`` for writing with the open(2) ``flags``: ``O_TRUNC`` starts empty, ``O_APPEND``
        (of a stored file) is stored as an append; return the handle's number."""
        handle = WriteHandle(node.ino, node.path, local=local)
        if flags & os.O_TRUNC:
            handle.buffer, handle.dirty = bytearray(), True
        else:
            handle.appending = bool(flags & os.O_APPEND) and not local
        node.page_etag = None
        return self.open(handle)

    def close(self, fh: int) -> Handle | None:
        """Forget handle ``fh`` and return it; its node goes too unless the kernel or another handle holds it."""
        handle = self._open.pop(fh, None)
        if isinstance(handle, ReadHandle | WriteHandle):
            node = self._inodes.get(handle.ino)
            if node is not None:
                node.opened -= 1
                self._inodes.discard(node)
        return handle

    def get(self, fh: int) -> Handle | None:
        return self._open.get(fh)

    def __getitem__(self, fh: int) -> Handle:
        """Given a handle number, return its handle (EBADF when it is not open)."""
        found = self._open.get(fh)
        if found is None:
            raise pyfuse3.FUSEError(errno.EBADF)
        return found

    def buffered_size(self, ino: int) -> int | None:
        """The size a writer gave inode ``ino`` and has not stored yet, if one did."""
        size = None
        for handle in self._open.values():
            if isinstance(handle, WriteHandle) and handle.ino == ino and handle.dirty and handle.buffer is not None:
                size = len(handle.buffer)
        return size

    def dirty(self) -> set[int]:
        """The inode numbers with written bytes not stored yet."""
        return {h.ino for h in self._open.values() if isinstance(h, WriteHandle) and h.dirty}

    def file_paths(self) -> set[str]:
        """The paths of the files open."""
        return {h.path for h in self._open.values() if isinstance(h, ReadHandle | WriteHandle)}

    def local_buffers(self) -> Iterator[tuple[str, int]]:
        """Each path made through the mount and not stored yet, with the bytes a handle open on it buffers."""
        for handle in self._open.values():
            if isinstance(handle, WriteHandle) and handle.local and handle.buffer is not None:
                yield handle.path, len(handle.buffer)

    def repoint(self, source: str, destination: str) -> None:
        """The open files at or below ``source`` are now below ``destination`` (a rename)."""
        for handle in self._open.values():
            if isinstance(handle, ReadHandle | WriteHandle) and is_within(handle.path, source):
                handle.path = destination + handle.path[len(source) :]


def render_matches(page: MatchPage) -> bytes:
    """Given a page of matches, return NDJSON: one match per line, the cursor when more remain (with
    ``x-truncated`` when the budget cut the page short), ``\\n``."""
    lines = [json.dumps(dump(match), ensure_ascii=False) for match in page.matches]
    if page.next_cursor:
        more: dict[str, Any] = {"next_cursor": page.next_cursor}
        if page.x_truncated is not None:
            more["x-truncated"] = dump(page.x_truncated)
        lines.append(json.dumps(more, ensure_ascii=False))
    return ("\n".join(lines) + ("\n" if lines else "") + "\n").encode()
