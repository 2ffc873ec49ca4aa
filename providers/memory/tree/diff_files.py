"""The workspace files added, changed and deleted between two instants (``afi diff``'s ``files`` part).

Each side is the tree ``/.afi/at/<instant>/files`` shows (:mod:`.at_files`); a file is changed when
its bytes differ (their SHA-256, or, for a file with no kept version, its size and time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .at_files import Held, files_at

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["FileChange", "FilesDiff", "diff_files"]


@dataclass(frozen=True)
class FileChange:
    path: str  # /files/<path>
    before: str | None  # the version's SHA-256 at the first instant (None: absent, or no kept bytes)
    after: str | None  # at the second
    size_before: int | None
    size_after: int | None


@dataclass
class FilesDiff:
    added: list[FileChange] = field(default_factory=list)
    changed: list[FileChange] = field(default_factory=list)
    deleted: list[FileChange] = field(default_factory=list)


def _same(a: Held, b: Held) -> bool:
    if a.sha256 is not None or b.sha256 is not None:
        return a.sha256 == b.sha256
    return (a.size, a.since) == (b.size, b.since)


def diff_files(space: Space, start: str, end: str) -> FilesDiff:
    """Given two canonical instants, return the workspace files added, changed and deleted between them."""
    before, after = files_at(space, start), files_at(space, end)
    out = FilesDiff()
    for rel in sorted(before.keys() | after.keys()):
        was, now = before.get(rel), after.get(rel)
        change = FileChange(f"/files/{rel}", was.sha256 if was else None, now.sha256 if now else None,
                            was.size if was else None, now.size if now else None)  # fmt: skip
        if was is None:
            out.added.append(change)
        elif now is None:
            out.deleted.append(change)
        elif not _same(was, now):
            out.changed.append(change)
    return out
