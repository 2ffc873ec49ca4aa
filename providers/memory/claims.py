"""A claim on a space that an import or a fork is filling: what it writes to disk beside its transaction
is found again, and undone, when the process that wrote it was killed mid-way.

Files go to disk before the rows that name them commit (a bundle's staged folder, a fork's files), so
a ``kill -9`` between the two leaves files no row knows of, and the next import or fork would find
the space "not empty". A claim is a file ``<root>/.afi-claim-<space>`` that the working process holds
an exclusive ``flock`` on until its transaction has ended, naming the staging folder it uses. A claim
whose lock can be taken was left by a process that died: its staging folder goes, and so does the
space's folder when the store holds no row of the space (the command found it empty, and nothing of
it committed). A claim held by a live process is a Conflict: one import or fork into a space at a time.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from afi.errors import Conflict

__all__ = ["SpaceClaim"]

_PREFIX = ".afi-claim-"


class SpaceClaim:
    """The claim of this process on ``space`` under ``root`` (see the module docstring)."""

    def __init__(self, root: Path, space: str) -> None:
        self.root = root
        self.space = space
        self.path = root / f"{_PREFIX}{space}"
        self._fd: int | None = None

    def take(self, holds_nothing: Callable[[], bool]) -> None:
        """Claim the space, first undoing what a killed process left; ``holds_nothing`` says whether the
        store has no row of the space (then its folder is such a leftover). Conflict when a live process
        holds the claim."""
        self.root.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise Conflict(f"another import or fork into the space {self.space!r} is running: wait for it",
                               path="/") from None  # fmt: skip
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)  # released (and unlinked) by its holder meanwhile: claim the file there now
        self._fd = fd
        left = os.read(fd, 4096)
        if left:  # a process died holding this claim: undo what it wrote
            self._undo(left, holds_nothing)
        self.note(None)

    def note(self, staging: Path | None) -> None:
        """Record the staging folder the work uses (removed if this process dies before :meth:`release`)."""
        assert self._fd is not None
        record = json.dumps({"space": self.space, "staging": None if staging is None else staging.name}).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, record, 0)

    def release(self) -> None:
        """Drop the claim: the work's transaction has committed or rolled back."""
        if self._fd is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            os.close(self._fd)
            self._fd = None

    def _undo(self, left: bytes, holds_nothing: Callable[[], bool]) -> None:
        try:
            record = json.loads(left)
            staging = record.get("staging") if isinstance(record, dict) else None
        except ValueError:
            staging = None
        if isinstance(staging, str) and staging.startswith(".afi-") and "/" not in staging:
            shutil.rmtree(self.root / staging, ignore_errors=True)
        folder = self.root / self.space
        if folder.is_dir() and not folder.is_symlink() and holds_nothing():
            shutil.rmtree(folder)
