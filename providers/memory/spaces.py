"""The spaces of one store: what each holds open (its fabric, notes view, workspace and ledger), opened once."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from afi.errors import InvalidPath
from afi.storage.database import Database

from .fabric.choice import EmbedderChoice
from .fabric.embedders import Embedder
from .fabric.fabric import MemoryFabric, create_memory_fabric
from .fabric.memory import space_memory
from .ledger.ledger import Ledger
from .ledger.source import LedgerSource
from .snapshots import Snapshots
from .tree.notes_view import NotesView
from .tree.times import SpaceClock
from .workspace.advisory import AdvisorySpaceLocks
from .workspace.history import FileHistory
from .workspace.locks import SpaceLocks
from .workspace.workspace import Workspace, WorkspaceLimits

__all__ = ["SPACE_NAME", "Space", "Spaces", "check_space_name"]

SPACE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Space:
    """What one space holds open: its fabric, the notes view, the workspace and the ledger."""

    fabric: MemoryFabric
    notes: NotesView
    workspace: Workspace
    ledger: Ledger
    clock: SpaceClock  # the time its top-level folders show
    snapshots: Snapshots  # named instants, shown at /.afi/at/<name>/
    files: FileHistory  # the workspace files' kept versions (/history/files, /.afi/at/<instant>/files)


class Spaces:
    """Opens each space of the store at first use, sweeping its workspace's orphaned temporary files.

    At most ``keep`` spaces stay open (each holds its vector index and caches in memory); opening one
    more lets go of the least recently used, which opens again, from the store, when next asked for. A
    thread still using a space let go of keeps its objects until it is done.
    """

    def __init__(
        self,
        db: str | Path,
        database: Database,
        root: Path,
        limits: WorkspaceLimits,
        locks: SpaceLocks | AdvisorySpaceLocks,
        embedder: Embedder | EmbedderChoice | None = None,
        *,
        keep: int = 64,
    ) -> None:
        self._db, self._database, self._root, self._limits = db, database, root, limits
        self._locks = locks
        self._embedder = embedder if embedder is not None else EmbedderChoice()
        self._embedder_lock = threading.Lock()
        self.keep = keep
        self._open: OrderedDict[str, Space] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, name: str) -> Space:
        with self._lock:
            found = self._open.get(name)
            if found is not None:
                self._open.move_to_end(name)
                return found
        check_space_name(name)
        if not (self._root / name).is_dir():  # no folder yet: nothing a crashed writer could have left
            return self._get_or_open(name)
        with self._locks.hold(name):  # no writer is mid-way, so a temporary file found now is an orphan
            found = self._get_or_open(name)
            found.workspace.sweep_temporary_files()
        return found

    def open_count(self) -> int:
        """How many spaces this process holds open."""
        with self._lock:
            return len(self._open)

    def _get_or_open(self, name: str) -> Space:
        with self._lock:
            found = self._open.get(name)
            if found is not None:
                self._open.move_to_end(name)
                return found
        # Built outside the lock: opening touches the store, which may wait for a writer that is itself
        # waiting for this lock to find its own space. Two threads racing to open one space both build
        # it; the first to come back keeps it.
        built = self._build(name)
        with self._lock:
            found = self._open.setdefault(name, built)
            self._open.move_to_end(name)
            while len(self._open) > self.keep:
                self._open.popitem(last=False)
        return found

    def embedder(self) -> Embedder:
        """The embedder every space of the store is opened with (chosen once: its model loads once)."""
        with self._embedder_lock:
            if isinstance(self._embedder, EmbedderChoice):
                self._embedder = self._embedder.resolve(self._database)
            return self._embedder

    def _build(self, name: str) -> Space:
        memory = space_memory(self._db, name, embedder=self.embedder())
        ledger = Ledger(self._db, space=name)
        return Space(
            create_memory_fabric(memory, observational=LedgerSource(ledger)),  # its reflections can be promoted
            NotesView(self._database, memory.scope),
            Workspace(self._root, name, self._database, self._limits),
            ledger,
            SpaceClock(self._database, name),
            Snapshots(self._database, name),
            FileHistory(self._database, name),
        )


def check_space_name(name: str) -> None:
    if not SPACE_NAME.match(name):
        raise InvalidPath(f"invalid space name {name!r}: use [a-z0-9][a-z0-9._-]{{0,63}}")
