"""``/.afi/at/<instant>/files/…``: the workspace as it stood at an instant, read-only.

Each path shows the version in effect then (:meth:`~..workspace.history.FileHistory.rows_at`: its
newest kept row at or before the instant; none when that row says it was deleted or moved away). A
path with no row at all (written before file history was kept, and not changed through the provider
since) shows its current bytes from its modification time on. Folders are those the files imply
(an empty folder keeps no past). A version reads as its kept bytes; grep reaches its text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from afi.errors import AfiError, InvalidPath, NotFound
from afi.model import Entry, Page, ReadResult

from ..workspace.history import blob_text
from .base import Listing
from .entries import content_type, dir_entry

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = [
    "Held",
    "at_file_candidates",
    "at_file_texts",
    "at_files_list",
    "at_files_read",
    "at_files_stat",
    "files_at",
    "held_entry",
    "read_only_dir",
    "slice_read",
]


@dataclass(frozen=True)
class Held:
    """What a path held at an instant: its size, since when, and its blob (None: today's bytes on disk)."""

    path: str
    size: int
    since: str
    sha256: str | None


def _stamp(mtime_ns: int) -> str:
    return datetime.fromtimestamp(mtime_ns / 1e9, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def files_at(space: Space, instant: str) -> dict[str, Held]:
    """Workspace path → what it held at ``instant``, for every file present then."""
    space.workspace.refresh()  # an edit on disk behind the provider's back is seen (at most every few seconds)
    held = {p: Held(p, v.size, v.at, v.sha256) for p, v in space.files.rows_at(instant).items() if v.present}
    for path, (size, mtime_ns) in space.files.untracked().items():
        since = _stamp(mtime_ns)
        if since <= instant:
            held[path] = Held(path, size, since, None)
    return held


def held_entry(path: str, held: Held, **attributes: object) -> Entry:
    """A kept version's entry, read-only."""
    tag = held.sha256[:20] if held.sha256 else f"{held.since}-{held.size:x}"
    return Entry(path=path, type="file", size=held.size, mtime=held.since, ctime=held.since,
                 content_type=content_type(held.path), etag=f'"v{tag}"',
                 attributes={"permissions": "r", **attributes})  # fmt: skip


def read_only_dir(path: str, at: str | None = None) -> Entry:
    return dir_entry(path, at).model_copy(update={"attributes": {"permissions": "r"}})


def _children(files: dict[str, Held], rel: str) -> tuple[list[str], list[str]] | None:
    """The file and folder names right below the folder ``rel`` ("" the top); None when it is no folder."""
    prefix = f"{rel}/" if rel else ""
    names: set[str] = set()
    folders: set[str] = set()
    for path in files:
        if path.startswith(prefix):
            head, sep, _ = path[len(prefix) :].partition("/")
            (folders if sep else names).add(head)
    if rel and not names and not folders:
        return None
    return sorted(names), sorted(folders)


def at_files_stat(space: Space, instant: str, rel: str, path: str) -> Entry:
    files = files_at(space, instant)
    if rel in files:
        return held_entry(path, files[rel])
    if _children(files, rel) is None:
        raise NotFound("no such file or folder at this instant", path=path)
    return read_only_dir(path, instant)


def at_files_list(space: Space, instant: str, rel: str, path: str, listing: Listing) -> Page:
    files = files_at(space, instant)
    if rel in files:
        raise InvalidPath("this is a file, not a folder: read it instead of listing it", path=path)
    found = _children(files, rel)
    if found is None:
        raise NotFound("no such folder at this instant", path=path)
    names, folders = found
    prefix = f"{rel}/" if rel else ""
    entries = [held_entry(f"{path}/{n}", files[prefix + n]) for n in names]
    entries += [read_only_dir(f"{path}/{f}", instant) for f in folders if f not in names]
    entries.sort(key=lambda e: e.path)
    return listing.page(entries)


def _bytes(space: Space, held: Held, path: str) -> bytes:
    if held.sha256 is not None:
        return space.files.blob(held.sha256, path=path)
    data, _ = space.workspace.read(held.path, path, 0, None)
    return data


def slice_read(entry: Entry, whole: bytes, offset: int, length: int | None) -> ReadResult:
    end = len(whole) if length is None else min(len(whole), offset + length)
    data = whole[offset:end] if offset < len(whole) else b""
    return ReadResult(data=data, content_type=entry.content_type, eof=end >= len(whole), size=len(whole),
                      etag=entry.etag, mtime=str(entry.mtime))  # fmt: skip


def at_files_read(space: Space, instant: str, rel: str, path: str, offset: int, length: int | None) -> ReadResult:
    files = files_at(space, instant)
    if rel not in files:
        if _children(files, rel) is not None:
            raise InvalidPath("this is a folder: list it instead of reading it", path=path)
        raise NotFound("no such file at this instant", path=path)
    held = files[rel]
    return slice_read(held_entry(path, held), _bytes(space, held, path), offset, length)


def at_file_candidates(space: Space, instant: str, base: str) -> Iterator[tuple[str, str, object]]:
    """Grep's candidates in an instant's files (``base``: ``/.afi/at/<segment>/files``): every file
    present then, its text loaded by :func:`at_file_texts` (there is no index over past bytes)."""
    for rel, held in sorted(files_at(space, instant).items()):
        yield f"{base}/{rel}", "version", held


def at_file_texts(space: Space, helds: list[Held]) -> dict[Held, str | None]:
    """The text of each version (None for a binary or vanished one), its blobs read in one query."""
    blobs = space.files.blobs(h.sha256 for h in helds if h.sha256 is not None)
    texts: dict[Held, str | None] = {}
    for held in helds:
        if held.sha256 is not None:
            data = blobs.get(held.sha256)
        else:
            try:
                data, _ = space.workspace.read(held.path, f"/files/{held.path}", 0, None)
            except AfiError:  # gone, or a folder now: nothing to search
                data = None
        texts[held] = None if data is None else blob_text(data)
    return texts
