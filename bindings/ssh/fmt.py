"""GNU-compatible renderings of AFI entries: ``ls -l`` columns, ``stat``, ``wc`` and ``tree`` lines.

Times show in UTC (the tree's clock), as ``ls`` shows them with ``TZ=UTC`` and ``LC_ALL=C``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from afi.model import Entry

__all__ = ["blocks", "ls_long", "mode_string", "parse_time", "stat_text", "wc_line"]

_SIX_MONTHS = timedelta(days=365.2425 / 2)


def parse_time(stamp: str | None) -> datetime:
    """Given an RFC 3339 stamp (``None`` is the epoch), return an aware UTC datetime."""
    if not stamp:
        return datetime.fromtimestamp(0, UTC)
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def mode_string(entry: Entry) -> str:
    """Given an entry, return its ``ls -l`` mode: type letter and rwx bits from its permissions."""
    writable = "w" in str(entry.attributes.get("permissions", "rw"))
    if entry.type == "directory":
        return "drwxr-xr-x" if writable else "dr-xr-xr-x"
    if entry.type == "symlink":
        return "lrwxrwxrwx"
    return "-rw-r--r--" if writable else "-r--r--r--"


def blocks(entry: Entry) -> int:
    """Given an entry, return the 1 KiB blocks ``ls`` totals (4 KiB allocation units)."""
    return -(-entry.size // 4096) * 4


def _ls_date(moment: datetime, now: datetime) -> str:
    if now - _SIX_MONTHS < moment <= now + timedelta(seconds=1):
        return f"{moment:%b} {moment.day:>2} {moment:%H:%M}"
    return f"{moment:%b} {moment.day:>2}  {moment:%Y}"


def ls_long(rows: Sequence[tuple[str, Entry]], user: str, group: str, now: datetime | None = None) -> list[str]:
    """Given (shown name, entry) rows, return ``ls -l`` lines with GNU's column alignment."""
    now = now or datetime.now(UTC)
    cells = []
    for name, entry in rows:
        shown = f"{name} -> {entry.target}" if entry.type == "symlink" and entry.target else name
        nlink = "2" if entry.type == "directory" else "1"
        cells.append((mode_string(entry), nlink, str(entry.size), _ls_date(parse_time(entry.mtime), now), shown))
    if not cells:
        return []
    w_link = max(len(c[1]) for c in cells)
    w_size = max(len(c[2]) for c in cells)
    return [f"{m} {n:>{w_link}} {user} {group} {s:>{w_size}} {d} {name}" for m, n, s, d, name in cells]


def _stat_type(entry: Entry) -> str:
    if entry.type == "directory":
        return "directory"
    if entry.type == "symlink":
        return "symbolic link"
    return "regular file" if entry.size else "regular empty file"


def _stat_time(stamp: str | None) -> str:
    moment = parse_time(stamp)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{moment.microsecond * 1000:09d} +0000"


def stat_text(entry: Entry, user: str, group: str) -> str:
    """Given an entry, return GNU ``stat``'s layout for it, then AFI's extra fields."""
    mode = mode_string(entry)
    bits = 0
    for index, char in enumerate(mode[1:]):
        if char != "-":
            bits |= 1 << (8 - index)
    name = f"{entry.path} -> {entry.target}" if entry.type == "symlink" and entry.target else entry.path
    lines = [
        f"  File: {name}",
        f"  Size: {entry.size:<10}\tBlocks: {blocks(entry) * 2:<10} IO Block: 4096   {_stat_type(entry)}",
        f"Access: ({bits:04o}/{mode})  Uid: ({user})   Gid: ({group})",
        f"Modify: {_stat_time(entry.mtime)}",
        f"Change: {_stat_time(entry.ctime)}",
        f"  Type: {entry.content_type}",
    ]
    if entry.etag:
        lines.append(f"  ETag: {entry.etag}")
    extra = {k: v for k, v in entry.attributes.items() if k != "permissions"}
    if extra:
        lines.append(f" Attrs: {json.dumps(extra, sort_keys=True, ensure_ascii=False)}")
    return "\n".join(lines) + "\n"


def wc_line(counts: Sequence[int], width: int, name: str | None) -> str:
    """Given the counts to show, the column width and the operand (``None`` for stdin), return a wc line."""
    body = " ".join(f"{count:>{width}}" for count in counts)
    return f"{body} {name}\n" if name is not None else f"{body}\n"
