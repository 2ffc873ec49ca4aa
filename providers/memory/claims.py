"""A claim on a space that an import or a fork is filling: what it writes to disk beside its transaction
is found again, and undone, when the process that wrote it was killed mid-way.

Files go to disk before the rows that name them commit (a bundle's staged folder, a fork's files, a
foreign import's files written in place), so a ``kill -9`` between the two leaves files no row knows
of. A claim is a file ``<root>/.afi-claim-<space>`` that the working process holds an exclusive
``flock`` on until its transaction has ended, naming the staging folder it uses. A claim whose lock
can be taken was left by a process that died: what its journal says it wrote in place is put back
unless its import committed (journal.py), its staging folder goes, and so does the space's folder
when the store holds no row of the space (the command found it empty, and nothing of it committed).
A claim held by a live process is a Conflict: one import or fork into a space at a time.

Such leftovers are undone by the next import or fork into the space, and by the next process that
opens the store (:func:`sweep_claims`), under the space's write lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path

from afi.errors import Conflict
from afi.storage.database import Database

from .journal import committed, forget_marker, marker_of, undo
from .spaces import SPACE_NAME
from .workspace.jail import FileJail

__all__ = ["STAGING_PREFIX", "SpaceClaim", "sweep_claims"]

_PREFIX = ".afi-claim-"
STAGING_PREFIX = ".afi-import-"  # a staging folder in the root, named by a claim


class SpaceClaim:
    """The claim of this process on ``space`` under ``root`` (see the module docstring)."""

    def __init__(self, root: Path, space: str, database: Database | None = None) -> None:
        self.root = root
        self.space = space
        self.path = root / f"{_PREFIX}{space}"
        self.database = database  # where a journaled import's marker is looked for
        self._fd: int | None = None

    def take(self, holds_nothing: Callable[[], bool]) -> None:
        """Claim the space, first undoing what a killed process left; ``holds_nothing`` says whether the
        store has no row of the space (then its folder is such a leftover). Conflict when a live process
        holds the claim."""
        self.root.mkdir(parents=True, exist_ok=True)
        if not self._lock(create=True):
            raise Conflict(f"another import or fork into the space {self.space!r} is running: wait for it",
                           path="/")  # fmt: skip
        self._recover(holds_nothing)
        self.note(None)

    def undo_if_dead(self, hold: Callable[[str], AbstractContextManager[None]],
                     holds_nothing: Callable[[], bool]) -> bool:  # fmt: skip
        """Undo and drop a claim its process left when it died (under the space's write lock, which
        ``hold(space)`` takes); return whether there was one. A live claim, or none, is left alone."""
        if not self._lock(create=False):
            return False
        try:
            with hold(self.space):
                self._recover(holds_nothing)
        finally:
            self.release()
        return True

    def _lock(self, *, create: bool) -> bool:
        """Take the claim file's lock (made when ``create``); False when a live process holds it, or (not
        ``create``) when there is no claim file."""
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if create else 0) | os.O_NOFOLLOW, 0o600)
            except FileNotFoundError:
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return True
            os.close(fd)  # released (and unlinked) by its holder meanwhile: claim the file there now
            if not create:
                return False

    def _recover(self, holds_nothing: Callable[[], bool]) -> None:
        assert self._fd is not None
        left = os.read(self._fd, 4096)
        if left:  # a process died holding this claim: undo what it wrote
            self._undo(left, holds_nothing)

    def note(self, staging: Path | None, *, journaled: bool = False) -> None:
        """Record the staging folder the work uses (removed if this process dies before :meth:`release`);
        ``journaled``: it holds the journal of files written in place (journal.py)."""
        assert self._fd is not None
        record = json.dumps({"space": self.space, "staging": None if staging is None else staging.name,
                             "journaled": journaled}).encode()  # fmt: skip
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
        except ValueError:
            record = None
        staging = record.get("staging") if isinstance(record, dict) else None
        if isinstance(staging, str) and staging.startswith(".afi-") and "/" not in staging:
            if isinstance(record, dict) and record.get("journaled") and self.database is not None:
                self._undo_journal(self.root / staging)
            shutil.rmtree(self.root / staging, ignore_errors=True)
        folder = self.root / self.space
        if folder.is_dir() and not folder.is_symlink() and holds_nothing():
            shutil.rmtree(folder)

    def _undo_journal(self, staging: Path) -> None:
        assert self.database is not None
        marker = marker_of(staging)
        if committed(self.database, marker):
            forget_marker(self.database, marker)
        elif (self.root / self.space).is_dir():
            undo(staging, FileJail(self.root, space=self.space, create=False))


def sweep_claims(root: Path, database: Database, hold: Callable[[str], AbstractContextManager[None]],
                 holds_nothing: Callable[[str], bool]) -> list[str]:  # fmt: skip
    """Undo what every import or fork that died left in ``root`` (each under its space's write lock, which
    ``hold(space)`` takes); return the spaces cleaned. A claim a live process holds is left to it."""
    return [space for space in _claimed(root)
            if SpaceClaim(root, space, database).undo_if_dead(hold, partial(holds_nothing, space))]  # fmt: skip


def _claimed(root: Path) -> Iterator[str]:
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if name.startswith(_PREFIX) and SPACE_NAME.match(name.removeprefix(_PREFIX)):
            yield name.removeprefix(_PREFIX)
