"""Files the mount holds itself: names the provider does not store, and content it refused.

Editors and tools make temp, swap and lock files beside the file they change (sed's ``sedXXXXXX``,
vim's ``4913``) under names the provider refuses. The mount keeps such a file in memory until it is
renamed onto a path the provider stores, deleted, or closed and unused for ``idle`` seconds.

A file whose content the provider refused when it was closed (broken front matter, an empty new note)
is *held*: it stays at its path, as written and marked with the reason, until it is rewritten into
something the provider stores, or removed. A shell's ``>`` does not look at what close returns, so
this is how the user finds out, and nothing they wrote is lost. Held files never go stale, and when
the mount has a :class:`~.held.HeldFolder` they are kept on disk too, so they survive a restart.

Both kinds share one budget: ``max_bytes`` together and ``max_files`` files, past which a write or
create fails with ENOSPC.
"""

from __future__ import annotations

import errno
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import pyfuse3
import trio

from afi.model import Entry, rfc3339
from afi.paths import parent

from .base import log
from .handles import Handles
from .held import HeldFolder, HeldRecord
from .nodes import NOT_STORED, Inodes

__all__ = ["LOCAL_BYTES", "LOCAL_FILES", "LOCAL_IDLE", "LocalFile", "LocalFiles"]

LOCAL_BYTES = 64 << 20  # bytes they may hold together; a write past it fails with ENOSPC
LOCAL_FILES = 1000  # how many there may be; one more is refused with ENOSPC
LOCAL_IDLE = 600.0  # seconds one may stay closed and unused before it is dropped


@dataclass
class LocalFile:
    """A file made through the mount that the provider did not accept as a name (an editor's temp file).

    ``reason`` is the provider's refusal: empty while the file is new and its name not yet refused (its
    bytes are then on their way to the provider, not held for long). ``held``: the provider refused its
    content, not its name (see the module's docstring).
    """

    data: bytes = b""
    mtime_ns: int = field(default_factory=time.time_ns)
    reason: str = ""
    used: float = field(default_factory=time.monotonic)  # when it was last made, written, renamed or closed
    held: bool = False
    base_etag: str | None = None  # held: the stored version it was written over (a rewrite's if_match)
    saved: bool = False  # held: the disk holds this version

    def entry(self, path: str) -> Entry:
        """Given the file's path, return the entry it shows as."""
        moment = rfc3339(self.mtime_ns / 1e9)
        attributes = {"permissions": "rw", "x-local": self.reason or "kept in memory by the mount"}
        if self.held:
            attributes[NOT_STORED] = self.reason
        return Entry(
            path=path,
            type="file",
            size=len(self.data),
            mtime=moment,
            ctime=moment,
            content_type="application/octet-stream",
            attributes=attributes,
        )


class LocalFiles(Mapping[str, LocalFile]):
    """The memory-only files by AFI path, their budget, and dropping the stale ones.

    Args:
        handles: the open handles (an open file is never stale; its buffer counts against the budget).
        inodes: the inode table (a dropped file's cached entry goes).
        max_bytes: bytes the files the provider refused may hold together.
        max_files: how many such files there may be.
        idle: seconds a file may stay closed and unused before it is dropped (a held one never is).
        folder: where held files are kept on disk too (read now: the held files of the last run show
            again); ``None``: in memory only.
    """

    def __init__(
        self,
        handles: Handles,
        inodes: Inodes,
        *,
        max_bytes: int = LOCAL_BYTES,
        max_files: int = LOCAL_FILES,
        idle: float = LOCAL_IDLE,
        folder: HeldFolder | None = None,
    ) -> None:
        self._files: dict[str, LocalFile] = {}
        self._handles = handles
        self._inodes = inodes
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.idle = idle
        self.folder = folder
        self._on_disk: set[str] = set()  # the paths the folder holds
        self._disk = trio.Lock()  # one change of the folder at a time, so the last one made is the one kept
        if folder is not None:
            self._load(folder)

    def __getitem__(self, path: str) -> LocalFile:
        return self._files[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def entries_in(self, folder: str) -> list[Entry]:
        """The entries of the memory-only files directly in ``folder``."""
        return [f.entry(p) for p, f in self._files.items() if parent(p) == folder and p != folder]

    def listing(self) -> bytes:
        """What ``/.afi/not-stored`` shows: one JSON object per held file (path, size, since, reason)."""
        lines = [
            json.dumps(
                {"path": p, "size": len(f.data), "since": rfc3339(f.mtime_ns / 1e9), "reason": f.reason},
                ensure_ascii=False,
            )
            for p, f in sorted(self._files.items())
            if f.held
        ]
        return "".join(line + "\n" for line in lines).encode()

    # -- changes ---------------------------------------------------------------------------

    def add(self, path: str, data: bytes = b"", *, reason: str = "") -> LocalFile:
        """Keep ``path`` in memory holding ``data`` (in place of what it held), refused for ``reason``."""
        local = self._files[path] = LocalFile(data, reason=reason)
        return local

    def keep(self, path: str, data: bytes, *, reason: str) -> None:
        """The provider refused to store ``path`` (``reason``): hold ``data`` in memory, budget permitting.

        Raises:
            pyfuse3.FUSEError: ENOSPC past the budget; a file still new at ``path`` then goes too.
        """
        try:
            self.make_room(path, len(data), reason=reason)
        except pyfuse3.FUSEError:
            local = self._files.get(path)
            if local is not None and not local.reason:
                self.discard(path)  # nothing half-made stays behind
            raise
        self.add(path, data, reason=reason)
        log.info("%s is kept in memory only: %s", path, reason)

    def hold(self, path: str, data: bytes, *, reason: str, base_etag: str | None) -> None:
        """The provider refused what ``path`` holds (``reason``): show ``data`` there, marked, until it is
        rewritten or removed. Call :meth:`sync` to keep it on disk too.

        Raises:
            pyfuse3.FUSEError: ENOSPC past the budget (logged: these bytes are then lost).
        """
        try:
            self.make_room(path, len(data), reason=reason)
        except pyfuse3.FUSEError:
            log.warning("%s: not stored (%s), and the mount has no room left to keep it: lost", path, reason)
            local = self._files.get(path)
            if local is not None and not local.reason:
                self.discard(path)
            raise
        self._files[path] = LocalFile(data, reason=reason, held=True, base_etag=base_etag)

    async def sync(self, *paths: str) -> None:
        """Make the folder on disk agree with what the mount holds at ``paths``: keep a held file's bytes
        there, remove any other's. Held bytes the disk cannot take stay in memory (logged)."""
        if self.folder is None:
            return
        async with self._disk:
            for path in paths:
                local = self._files.get(path)
                if local is not None and local.held:
                    if local.saved:
                        continue
                    record = HeldRecord(path, local.data, local.reason, local.base_etag, local.mtime_ns)
                    try:
                        await trio.to_thread.run_sync(self.folder.save, record)
                    except OSError as err:
                        log.warning("%s: held in memory only: cannot keep it in %s: %s", path, self.folder.root, err)
                        continue
                    local.saved = True
                    self._on_disk.add(path)
                elif path in self._on_disk:
                    try:
                        await trio.to_thread.run_sync(self.folder.remove, path)
                    except OSError as err:
                        log.warning("%s: cannot remove its held copy from %s: %s", path, self.folder.root, err)
                    self._on_disk.discard(path)

    def touch(self, path: str) -> None:
        """``path`` was used now (written, or closed): its idle time starts again."""
        local = self._files.get(path)
        if local is not None:
            local.used = time.monotonic()

    def resize(self, path: str, size: int) -> None:
        """Cut or zero-extend memory-only ``path`` to ``size`` bytes, budget permitting (else ENOSPC)."""
        self.make_room(path, size)
        local = self._files[path]
        local.data = local.data[:size].ljust(size, b"\x00")
        local.used = time.monotonic()
        local.saved = False

    def rename(self, source: str, destination: str, *, reason: str) -> None:
        """Move memory-only ``source`` to ``destination``, a name the provider refused too (``reason``).

        A held file stays held there (its bytes are the user's): call :meth:`sync` for both paths.
        """
        local = self._files.pop(source)
        local.reason = reason
        local.used = time.monotonic()
        local.saved = False
        self._files[destination] = local

    def pop(self, path: str) -> LocalFile | None:
        """Forget ``path`` (stored by the provider now, or deleted); return what it was."""
        return self._files.pop(path, None)

    def discard(self, path: str) -> None:
        """Forget ``path`` and the entry cached for it: the file is gone."""
        self._files.pop(path, None)
        self._inodes.stale(path)

    # -- the budget ------------------------------------------------------------------------

    def sweep(self) -> None:
        """Drop the files that no handle has open and that were not used for ``idle`` seconds."""
        if not self._files:
            return
        now = time.monotonic()
        in_use = self._handles.file_paths()
        for path, local in list(self._files.items()):
            if not local.held and path not in in_use and now - local.used >= self.idle:
                self.discard(path)
                log.info(
                    "%s: memory-only file dropped (%d bytes): closed and unused for %.0f s",
                    path,
                    len(local.data),
                    now - local.used,
                )

    def make_room(self, path: str, size: int, *, reason: str | None = None) -> None:
        """Refuse with ENOSPC when memory-only ``path`` holding ``size`` bytes passes the budget.

        Only files the provider refused count (``reason``: a refusal about to make ``path`` memory-only);
        a new file whose name is not refused is on its way to the provider. Stale files are dropped first.
        """
        local = self._files.get(path)
        counted = local is not None and bool(local.reason)
        if not counted and reason is None:
            return

        def over() -> str | None:
            files, total, held = self._others(path)
            if not counted and files + 1 > self.max_files:
                return f"{files} such files are the most it holds (local_files)"
            if size > held and total + size > self.max_bytes:
                return f"{total + size} bytes would pass the {self.max_bytes} bytes they may hold (local_bytes)"
            return None

        if over() is None:
            return
        self.sweep()
        why = over()
        if why is None:
            return
        refusal = reason or (local.reason if local is not None else "")
        log.warning("%s: refused with ENOSPC: kept in memory only (%s), and %s", path, refusal, why)
        raise pyfuse3.FUSEError(errno.ENOSPC)

    def _load(self, folder: HeldFolder) -> None:
        try:
            records = folder.load()
        except OSError as err:
            log.warning("cannot read the held files in %s: %s", folder.root, err)
            return
        for record in records:
            self._files[record.path] = LocalFile(
                record.data, record.mtime_ns, record.reason, held=True, base_etag=record.base_etag, saved=True
            )
            self._on_disk.add(record.path)
        if records:
            log.warning("%d file(s) the store refused are held at their paths (see /.afi/not-stored)", len(records))

    def _others(self, path: str) -> tuple[int, int, int]:
        """Return the refused files other than ``path``: how many, their bytes; and the bytes ``path`` holds.

        A file's bytes are the most of what it holds and what an open handle on it has buffered.
        """
        held = {p: len(f.data) for p, f in self._files.items() if f.reason}
        for buffered, size in self._handles.local_buffers():
            if buffered in held:
                held[buffered] = max(held[buffered], size)
        mine = held.pop(path, 0)
        return len(held), sum(held.values()), mine
