"""A sync between two stores' copies of a space: each side sends what the other has not applied yet.

Either side is an :class:`Endpoint`: this store through its provider (:class:`LocalEndpoint`), or
another reached however it is reached (another store file, an ``afi serve`` URL). A pull asks the
remote for its changes after the seq this store recorded for it and applies them here, batch by
batch, each batch one transaction that also moves the recorded seq (the next batch is read meanwhile);
a push is the same with the roles swapped. A sync killed between batches resumes from the last one
applied; one killed inside a batch leaves that batch unapplied.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from afi.errors import Conflict as Refused
from afi.provider import Caller

from .apply import Applied, Conflict
from .batches import Batch
from .files import FileBatch, FilesApplied
from .ledger import LedgerApplied, LedgerBatch
from .space_state import SpaceState, StateApplied

__all__ = ["Endpoint", "LocalEndpoint", "SyncReport", "Traffic", "sync"]


class Endpoint(Protocol):
    """One side of a sync, for one space."""

    label: str  # where this side is, as the other side records it

    def identity(self) -> str: ...

    def read(self, *, since: int, peer: str) -> Batch: ...

    def received(self, peer: str) -> int: ...

    def apply(self, batch: Batch, *, label: str) -> Applied: ...

    def read_files(self, *, since: int, peer: str) -> FileBatch: ...

    def received_files(self, peer: str) -> int: ...

    def apply_files(self, batch: FileBatch, *, label: str) -> FilesApplied: ...

    def read_ledger(self, *, since: int, peer: str) -> LedgerBatch: ...

    def received_ledger(self, peer: str) -> int: ...

    def apply_ledger(self, batch: LedgerBatch, *, label: str) -> LedgerApplied: ...

    def read_state(self) -> SpaceState: ...

    def apply_state(self, state: SpaceState) -> StateApplied: ...


class _SyncProvider(Protocol):
    def store_id(self) -> str: ...

    def sync_read(self, caller: Caller, *, since: int, peer: str) -> Batch: ...

    def sync_received(self, caller: Caller, peer: str) -> int: ...

    def sync_apply(self, caller: Caller, batch: Batch, *, label: str) -> Applied: ...

    def sync_read_files(self, caller: Caller, *, since: int, peer: str) -> FileBatch: ...

    def sync_received_files(self, caller: Caller, peer: str) -> int: ...

    def sync_apply_files(self, caller: Caller, batch: FileBatch, *, label: str) -> FilesApplied: ...

    def sync_read_ledger(self, caller: Caller, *, since: int, peer: str) -> LedgerBatch: ...

    def sync_received_ledger(self, caller: Caller, peer: str) -> int: ...

    def sync_apply_ledger(self, caller: Caller, batch: LedgerBatch, *, label: str) -> LedgerApplied: ...

    def sync_read_state(self, caller: Caller) -> SpaceState: ...

    def sync_apply_state(self, caller: Caller, state: SpaceState) -> StateApplied: ...


@dataclass
class LocalEndpoint:
    """A space of a store opened here, through its provider's verbs as ``caller``."""

    provider: _SyncProvider
    caller: Caller
    label: str

    def identity(self) -> str:
        return self.provider.store_id()

    def read(self, *, since: int, peer: str) -> Batch:
        return self.provider.sync_read(self.caller, since=since, peer=peer)

    def received(self, peer: str) -> int:
        return self.provider.sync_received(self.caller, peer)

    def apply(self, batch: Batch, *, label: str) -> Applied:
        return self.provider.sync_apply(self.caller, batch, label=label)

    def read_files(self, *, since: int, peer: str) -> FileBatch:
        return self.provider.sync_read_files(self.caller, since=since, peer=peer)

    def received_files(self, peer: str) -> int:
        return self.provider.sync_received_files(self.caller, peer)

    def apply_files(self, batch: FileBatch, *, label: str) -> FilesApplied:
        return self.provider.sync_apply_files(self.caller, batch, label=label)

    def read_ledger(self, *, since: int, peer: str) -> LedgerBatch:
        return self.provider.sync_read_ledger(self.caller, since=since, peer=peer)

    def received_ledger(self, peer: str) -> int:
        return self.provider.sync_received_ledger(self.caller, peer)

    def apply_ledger(self, batch: LedgerBatch, *, label: str) -> LedgerApplied:
        return self.provider.sync_apply_ledger(self.caller, batch, label=label)

    def read_state(self) -> SpaceState:
        return self.provider.sync_read_state(self.caller)

    def apply_state(self, state: SpaceState) -> StateApplied:
        return self.provider.sync_apply_state(self.caller, state)


@dataclass
class Traffic:
    """What went one way: batches, versions sent, and what applying them did."""

    batches: int = 0
    notes: int = 0
    forgotten: int = 0
    inserted: int = 0
    merged: int = 0
    deleted: int = 0
    conflicts: list[Conflict] = field(default_factory=list)
    file_versions: int = 0
    files_written: int = 0
    files_removed: int = 0
    unkept: list[str] = field(default_factory=list)
    ledger_entries: int = 0
    sessions: int = 0
    blocks: int = 0
    snapshots: int = 0
    folders: int = 0
    kept_aside: list[str] = field(default_factory=list)  # blocks, snapshots and ledger ids a clash moved

    def add_ledger(self, batch: LedgerBatch, applied: LedgerApplied | None) -> None:
        """Count a ledger batch (one that only moves the peer's recorded position is not one)."""
        if not batch.entries:
            return
        self.batches += 1
        self.ledger_entries += len(batch.entries)
        if applied is not None:
            self.sessions += applied.sessions
            self.kept_aside += applied.renamed

    def add_state(self, applied: StateApplied) -> None:
        """Count what merging the other side's blocks and snapshots changed."""
        self.blocks += applied.blocks
        self.snapshots += applied.snapshots + applied.dropped
        self.folders += applied.folders
        self.kept_aside += applied.conflicts

    def add_files(self, batch: FileBatch, applied: FilesApplied | None) -> None:
        """Count a file batch (one that only moves the peer's recorded position is not one)."""
        if not batch.versions:
            return
        self.batches += 1
        self.file_versions += len(batch.versions)
        if applied is not None:
            self.files_written += applied.written
            self.files_removed += applied.removed
            self.unkept += applied.unkept

    def add(self, batch: Batch, applied: Applied | None) -> None:
        """Count a batch (one that only moves the peer's recorded seq past changes it sent us is not one)."""
        if not batch.notes and not batch.forgotten:
            return
        self.batches += 1
        self.notes += len(batch.notes)
        self.forgotten += len(batch.forgotten)
        if applied is not None:
            self.inserted += applied.inserted
            self.merged += applied.merged
            self.deleted += applied.deleted
            self.conflicts += applied.conflicts


@dataclass
class SyncReport:
    """A sync's two directions (a direction not asked for stays empty)."""

    pulled: Traffic = field(default_factory=Traffic)
    pushed: Traffic = field(default_factory=Traffic)
    dry_run: bool = False


Progress = Callable[[str, Traffic], None]


def sync(local: Endpoint, remote: Endpoint, *, pull: bool = True, push: bool = True, dry_run: bool = False,
         progress: Progress | None = None) -> SyncReport:  # fmt: skip
    """Bring ``local`` and ``remote`` in step: the remote's changes applied here (pull), then this
    side's applied there (push). A dry run reads what would travel and applies nothing.

    Raises Conflict when both sides are one store (or copies of one store file).
    """
    ours, theirs = local.identity(), remote.identity()
    if ours == theirs:
        raise Refused(f"{remote.label} is this store (or a copy of its file, with the same store id {ours}): "
                      "a store syncs with other stores")  # fmt: skip
    report = SyncReport(dry_run=dry_run)
    if pull:
        _one_way(remote, theirs, local, ours, report.pulled, dry_run, progress and (lambda t: progress("pull", t)))
    if push:
        _one_way(local, ours, remote, theirs, report.pushed, dry_run, progress and (lambda t: progress("push", t)))
    return report


class _Batch(Protocol):
    upto: int
    more: bool


B = TypeVar("B", bound=_Batch)
R = TypeVar("R")


def _one_way(source: Endpoint, source_id: str, target: Endpoint, target_id: str, traffic: Traffic, dry_run: bool,
             progress: Callable[[Traffic], None] | None) -> None:  # fmt: skip
    """The notes first (a file note arrives with or before its file), then the files, the ledger, and
    last the working blocks and snapshots (sent whole: small, and merged alike on both sides)."""
    steps = _Steps(source_id, target_id, source.label, dry_run, traffic, progress)
    steps.drain(target.received, source.read, target.apply, traffic.add, lambda b: bool(b.notes or b.forgotten))
    steps.drain(target.received_files, source.read_files, target.apply_files, traffic.add_files,
                lambda b: bool(b.versions))  # fmt: skip
    steps.drain(target.received_ledger, source.read_ledger, target.apply_ledger, traffic.add_ledger,
                lambda b: bool(b.entries))  # fmt: skip
    state = source.read_state()
    if not dry_run and not _same_state(state, target.read_state()):
        traffic.add_state(target.apply_state(state))
        if progress is not None:
            progress(traffic)


def _same_state(a: SpaceState, b: SpaceState) -> bool:
    """Whether merging one state into the other would change nothing."""
    return (a.version, a.blocks, a.snapshots, a.dropped, a.folders) == (b.version, b.blocks, b.snapshots, b.dropped,
                                                                          b.folders)  # fmt: skip


@dataclass
class _Steps:
    """One direction of a sync, one stream at a time: batches read and applied until none is left."""

    source_id: str
    target_id: str
    label: str
    dry_run: bool
    traffic: Traffic
    progress: Callable[[Traffic], None] | None

    def drain(self, received: Callable[[str], int], read: Callable[..., B], apply: Callable[..., R],
              count: Callable[[B, R | None], None], holds: Callable[[B], bool]) -> None:  # fmt: skip
        since = received(self.source_id)
        # the next batch is read while the other side applies this one (a read changes nothing: one
        # read ahead in vain, when an apply fails, costs only its time)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="afi-sync-read") as ahead:
            batch = read(since=since, peer=self.target_id)
            while True:
                if batch.upto <= since and not holds(batch):
                    return
                following = ahead.submit(read, since=batch.upto, peer=self.target_id) if batch.more else None
                count(batch, None if self.dry_run else apply(batch, label=self.label))
                if self.progress is not None:
                    self.progress(self.traffic)
                since = batch.upto
                if following is None:
                    return
                batch = following.result()
