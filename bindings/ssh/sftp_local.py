"""Memory-only files over SFTP: those a client makes under names the provider does not store.

``sed -i`` writes ``facts/sedXXXXXX`` beside the note it edits and vim-style saves write a temp file
and rename it over the original; under ``/facts`` only ``<name>.md`` exists, so the provider refuses
those names. As the FUSE mount does (:mod:`afi.bindings.fuse.localfiles`), one SFTP session keeps such
a file in its memory: it is listed while it exists, renaming it onto a name the provider stores writes
it there, and it goes when deleted, when the session ends, or once closed and unused for ``idle``
seconds. ``max_files`` files and ``max_bytes`` bytes together are the most one session holds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

from afi.errors import TooLarge
from afi.paths import parent

__all__ = ["LOCAL_BYTES", "LOCAL_FILES", "LOCAL_IDLE", "LocalFile", "LocalFiles"]

LOCAL_BYTES = 16 << 20  # bytes one session's memory-only files may hold together
LOCAL_FILES = 100  # how many memory-only files one session may hold
LOCAL_IDLE = 600.0  # seconds one may stay closed and unused before it is dropped

log = logging.getLogger(__name__)


@dataclass
class LocalFile:
    """A file the provider refused by its name (``reason``), held in the session's memory."""

    data: bytes
    reason: str
    mtime: float = field(default_factory=time.time)
    used: float = field(default_factory=time.monotonic)  # when it was last made, written or renamed


class LocalFiles:
    """One SFTP session's memory-only files by AFI path, within a budget of files and bytes.

    Args:
        max_bytes: bytes the files may hold together.
        max_files: how many files there may be.
        idle: seconds a file no handle has open may stay unused before it is dropped.
    """

    def __init__(self, *, max_bytes: int = LOCAL_BYTES, max_files: int = LOCAL_FILES, idle: float = LOCAL_IDLE) -> None:
        self._files: dict[str, LocalFile] = {}
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.idle = idle

    def __contains__(self, path: object) -> bool:
        return path in self._files

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def get(self, path: str) -> LocalFile | None:
        """The memory-only file at ``path``, if there is one."""
        return self._files.get(path)

    def in_folder(self, folder: str) -> list[tuple[str, LocalFile]]:
        """The memory-only files directly in ``folder``, by path."""
        return [(p, f) for p, f in self._files.items() if parent(p) == folder]

    # -- changes ---------------------------------------------------------------------------

    def put(self, path: str, data: bytes, *, reason: str) -> None:
        """Hold ``data`` at ``path`` (in place of what it held); call :meth:`check` first."""
        self._files[path] = LocalFile(data, reason)

    def rename(self, source: str, destination: str, *, reason: str) -> None:
        """Move ``source`` to ``destination``, a name the provider refuses too (``reason``)."""
        local = self._files.pop(source)
        local.reason = reason
        local.used = time.monotonic()
        self._files[destination] = local

    def pop(self, path: str) -> LocalFile | None:
        """Forget ``path`` (stored by the provider now, or deleted); return what it was."""
        return self._files.pop(path, None)

    # -- the budget ------------------------------------------------------------------------

    def sweep(self, in_use: Collection[str]) -> None:
        """Drop the files not in ``in_use`` (no open handle) and unused for ``idle`` seconds."""
        now = time.monotonic()
        for path, local in list(self._files.items()):
            if path not in in_use and now - local.used >= self.idle:
                del self._files[path]
                log.info(
                    "%s: memory-only file dropped (%d bytes): unused for %.0f s",
                    path,
                    len(local.data),
                    now - local.used,
                )

    def check(self, path: str, size: int, open_sizes: Mapping[str, int]) -> None:
        """Refuse when ``path`` holding ``size`` bytes would pass the budget (stale files are dropped first).

        ``open_sizes`` holds the buffers of the handles open for writing, by path: what a handle has
        written and not yet closed counts against the budget as much as what is stored.

        Raises:
            TooLarge: the session holds as many files or bytes as it may.
        """
        why = self._over(path, size, open_sizes)
        if why is not None:
            self.sweep(open_sizes)
            why = self._over(path, size, open_sizes)
        if why is not None:
            raise TooLarge(
                f"this name is not one the provider stores, so the file would be kept in this session's memory, "
                f"and {why}",
                path=path,
            )

    def _over(self, path: str, size: int, open_sizes: Mapping[str, int]) -> str | None:
        others = {p: max(len(f.data), open_sizes.get(p, 0)) for p, f in self._files.items() if p != path}
        if path not in self._files and len(others) + 1 > self.max_files:
            return f"{len(others)} such files are the most one session holds"
        if sum(others.values()) + size > self.max_bytes:
            return f"they may hold {self.max_bytes} bytes together"
        return None
