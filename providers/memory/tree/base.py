"""What every area of the tree shares: the verbs' defaults, one list request, and slicing a read.

An area handler answers the verbs for the paths of its top-level folder (a :class:`~.locate.Node`
says which). The defaults are those of a read-only folder of rendered texts: ``stat`` and ``read``
go through :meth:`Area.text`, ``list`` pages :meth:`Area.children`, and every write is refused.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from afi.errors import Conflict, Forbidden, InvalidPath, NotFound, Unsupported
from afi.glob import Glob
from afi.model import DeleteResult, Entry, Page, ReadResult

from ..search.cursor import decode_cursor, encode_cursor
from .entries import dir_entry
from .locate import Node

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["MAX_LIST", "Area", "Listing", "WriteOptions", "check_etag", "check_limit"]

MAX_LIST = 1000
_MAX_BATCH = 1000  # candidates a listing fetches at once once its first batch fell short
Row = TypeVar("Row")


@dataclass(frozen=True)
class Listing:
    """One list request: at most ``limit`` entries, named after ``after`` (the cursor's), matching ``glob``."""

    limit: int
    glob: Glob | None = None
    after: str | None = None

    @classmethod
    def of(cls, limit: int, glob: str | None) -> Listing:
        """Check the page size and read the glob (docs/afi.md, "Globs": an empty one is none)."""
        return cls(check_limit(limit, MAX_LIST), Glob(glob) if glob else None)

    def at(self, cursor: str | None) -> Listing:
        position = decode_cursor("list", cursor)
        return Listing(self.limit, self.glob, None if position is None else str(position["a"]))

    def matcher(self) -> Callable[[str], bool] | None:
        """The glob as a test of a name (None when there is none)."""
        return None if self.glob is None else self.glob.matches

    @property
    def prefix(self) -> str:
        """What every name the glob matches starts with."""
        return "" if self.glob is None else self.glob.prefix

    def fill(
        self, fetch: Callable[[str | None, int], builtins.list[Row]], name: Callable[[Row], str]
    ) -> builtins.list[Row]:
        """Given ``fetch(after, n)``, which returns up to ``n`` rows named after ``after`` in name order,
        a superset of those the glob matches (a store's pre-filter), return up to ``limit + 1`` rows
        the glob matches: the glob decides, batch after batch."""
        want = self.limit + 1
        if self.glob is None:
            return fetch(self.after, want)
        kept: builtins.list[Row] = []
        after, batch = self.after, want
        while True:
            rows = fetch(after, batch)
            kept += [row for row in rows if self.glob.matches(name(row))]
            if len(kept) >= want or len(rows) < batch:
                return kept[:want]
            after, batch = name(rows[-1]), max(want, min(batch * 4, _MAX_BATCH))

    def page(self, entries: list[Entry]) -> Page:
        """Filter a whole folder's entries (sorted by name) by glob and cursor, and cut one page."""
        if self.glob is not None:
            matches = self.glob.matches
            entries = [e for e in entries if matches(e.path.rsplit("/", 1)[-1])]
        if self.after is not None:
            entries = [e for e in entries if e.path.rsplit("/", 1)[-1] > self.after]
        return self.cut(entries[: self.limit + 1])

    def cut(self, entries: list[Entry]) -> Page:
        """Given up to ``limit + 1`` entries already filtered, return the page and its cursor."""
        if len(entries) > self.limit:
            entries = entries[: self.limit]
            last = entries[-1].path.rsplit("/", 1)[-1]
            return Page(entries=entries, next_cursor=encode_cursor("list", {"a": last}))
        return Page(entries=entries)


@dataclass(frozen=True)
class WriteOptions:
    """How a write lands: at ``offset`` or appended, only when absent, or only over the etag ``if_match``."""

    offset: int | None = None
    append: bool = False
    create_only: bool = False
    if_match: str | None = None


class Area:
    """The verbs of one top-level folder. The defaults: a read-only folder of rendered texts."""

    def stat(self, space: Space, node: Node) -> Entry:
        if node.is_area_root:
            return dir_entry(node.path, space.clock.changed_at())
        return self.text(space, node)[0]

    def list(self, space: Space, node: Node, listing: Listing) -> Page:
        if not node.is_area_root:
            self.stat(space, node)  # not_found when absent
            raise InvalidPath("this is a file, not a folder: read it instead of listing it", path=node.path)
        return listing.page(self.children(space))

    def children(self, space: Space) -> builtins.list[Entry]:
        """The folder's entries, sorted by name."""
        return []

    def read(self, space: Space, node: Node, offset: int, length: int | None) -> ReadResult:
        if node.is_area_root:
            raise InvalidPath("this is a folder: list it instead of reading it", path=node.path)
        entry, text = self.text(space, node)
        whole = text.encode()
        end = len(whole) if length is None else min(len(whole), offset + length)
        data = whole[offset:end] if offset < len(whole) else b""
        return ReadResult(data=data, content_type=entry.content_type, eof=end >= len(whole), size=len(whole),
                          etag=entry.etag, mtime=str(entry.mtime))  # fmt: skip

    def text(self, space: Space, node: Node) -> tuple[Entry, str]:
        """A file's entry and its text."""
        raise NotFound("no such file", path=node.path)

    def write(self, space: Space, node: Node, data: bytes, options: WriteOptions) -> Entry:
        raise Forbidden(f"/{node.area} is read-only", path=node.path)

    def mkdir(self, space: Space, node: Node, *, parents: bool) -> Entry:
        raise Unsupported(f"/{node.area} holds notes, not folders; folders exist only under /files", path=node.path)

    def delete(self, space: Space, node: Node, *, recursive: bool) -> DeleteResult:
        raise Forbidden(f"/{node.area} is read-only", path=node.path)

    def move(self, space: Space, src: Node, dst: Node, *, overwrite: bool) -> Entry:
        raise Forbidden(f"/{src.area} is read-only", path=src.path)


def check_limit(limit: int, cap: int) -> int:
    if not isinstance(limit, int) or limit <= 0:
        raise InvalidPath(f"limit must be a positive whole number (at most {cap}), not {limit!r}")
    return min(limit, cap)


def check_etag(entry: Entry, if_match: str) -> None:
    wanted = {tag.strip() for tag in if_match.split(",")}
    if "*" not in wanted and entry.etag not in wanted:
        raise Conflict("the target changed since it was read (if_match does not match its etag)", path=entry.path)
