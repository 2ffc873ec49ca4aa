"""How much a space's workspace may hold: a cap per file and a quota per space, named in every refusal.

The cap is on a file's size. The quota charges each file the bytes it has on disk, never more than
its size (:func:`charged`): a hole (a write far past the end leaves one) costs nothing, as ``du``
counts it, and a file of a few bytes costs those bytes, not the block that holds them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from afi import config
from afi.config import parse_size
from afi.errors import TooLarge

__all__ = ["WorkspaceLimits", "charged", "charged_after", "check_limits", "format_size", "parse_size", "size_after"]

_BLOCK = 4096


@dataclass(frozen=True)
class WorkspaceLimits:
    """How much one space's workspace may hold: bytes per file, and bytes in all its files together."""

    max_file_bytes: int = config.DEFAULT_MAX_FILE_BYTES
    space_quota_bytes: int = config.DEFAULT_SPACE_QUOTA_BYTES

    @classmethod
    def from_env(cls) -> WorkspaceLimits:
        """The limits from ``AFI_MAX_FILE_SIZE`` and ``AFI_SPACE_QUOTA`` (bytes, or with K/M/G/T), else the defaults.

        Raises:
            ValueError: a value that is not a size.
        """
        return cls(max_file_bytes=config.max_file_size(), space_quota_bytes=config.space_quota())


def format_size(size: int) -> str:
    """Given bytes, return them as a person reads them (``1 GiB``, ``2.4 KiB (2,500 bytes)``, ``100 bytes``)."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            if size % scale == 0:
                return f"{size // scale} {unit}"
            return f"{size / scale:.1f} {unit} ({size:,} bytes)"
    return f"{size} bytes"


def size_after(existing: os.stat_result | None, data: bytes, offset: int | None, append: bool) -> int:
    """The size a file will have once ``data`` is written as asked."""
    before = existing.st_size if existing is not None else 0
    if append:
        return before + len(data)
    if offset is None:
        return len(data)
    if existing is None:
        return offset + len(data)
    return max(before, offset + len(data)) if data else before


def charged(st: os.stat_result) -> int:
    """Given a file's stat, return the bytes the quota charges it: its allocated blocks, at most its size."""
    return min(st.st_size, st.st_blocks * 512)


def charged_after(existing: os.stat_result | None, data: bytes, offset: int | None, append: bool) -> int:
    """At most the bytes the quota will charge a file once ``data`` is written as asked: what it was
    charged (when written in place) and the blocks the new bytes may take, at most its new size."""
    touched = (len(data) // _BLOCK + 2) * _BLOCK if data else 0  # the blocks a write may begin and end in
    in_place = existing is not None and (append or offset is not None)
    before = charged(existing) if in_place and existing is not None else 0
    return min(size_after(existing, data, offset, append), before + touched)


def check_limits(
    limits: WorkspaceLimits, afi_path: str, *, size: int, before: int, after: int, used_elsewhere: int
) -> None:
    """Refuse a write that would make a file ``size`` bytes long, when that passes the file cap, or that
    would raise what the quota charges it from ``before`` to ``after`` bytes when that passes the space's
    quota given the ``used_elsewhere`` bytes charged to its other files.

    Raises:
        TooLarge: naming the limit, the setting that changes it, and the sizes.
    """
    if size > limits.max_file_bytes:
        raise TooLarge(
            f"a workspace file may hold at most {format_size(limits.max_file_bytes)} "
            f"(AFI_MAX_FILE_SIZE); this write would make it {format_size(size)}",
            path=afi_path,
        )
    if after > before and used_elsewhere + after > limits.space_quota_bytes:
        raise TooLarge(
            f"this space's workspace may hold at most {format_size(limits.space_quota_bytes)} "
            f"(AFI_SPACE_QUOTA); {format_size(used_elsewhere)} are in use and this write needs {format_size(after)}",
            path=afi_path,
        )
