"""The provider's verbs for ``afi sync``: a space's changes out, a peer's changes in.

Syncing reads every version of a space and writes versions with their own ids and times, as only the
store itself does otherwise: both verbs need ``afi:admin`` on the space. Applying a batch holds the
space's write lock and is one transaction with its audit row (``sync``), so a sync killed at any
moment leaves the space as it was before the batch or after it, never between.

Mixed into :class:`~.provider.MemoryProvider`, which supplies the store, the spaces, their write
locks and the audit log.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from afi.errors import InvalidPath
from afi.provider import Caller
from afi.storage.database import Database

from .sync.apply import Applied, apply_batch
from .sync.batches import MAX_BATCH_CHANGES, Batch, read_batch
from .sync.files import FileBatch, FilesApplied, apply_file_batch, check_out, read_file_batch
from .sync.ledger import LedgerApplied, LedgerBatch, apply_ledger_batch, read_ledger_batch
from .sync.peers import Peer, peers, received, store_id
from .sync.space_state import SpaceState, StateApplied, apply_space_state, read_space_state

if TYPE_CHECKING:
    from afi.auth.audit import AuditLog

    from .spaces import Space
    from .workspace.advisory import AdvisorySpaceLocks
    from .workspace.locks import SpaceLocks

__all__ = ["SyncVerbs"]

T = TypeVar("T")


class SyncVerbs:
    """A space's changes for a peer, a peer's batch applied, and how far each peer got."""

    _db: Database
    _write_locks: SpaceLocks | AdvisorySpaceLocks
    audit: AuditLog

    if TYPE_CHECKING:

        def _space(self, name: str) -> Space: ...

        def _audited(self, caller: Caller, verb: str, path: str, run: Callable[[], T], *,
                     where: str | None = None) -> T: ...  # fmt: skip

    def store_id(self) -> str:
        """This store's id among the stores it syncs with."""
        return store_id(self._db)

    def sync_read(self, caller: Caller, *, since: int, peer: str, limit: int = MAX_BATCH_CHANGES) -> Batch:
        """The caller's space's changes after ``since`` for ``peer`` (leaving out what came from it)."""
        caller.require("afi:admin", path="/")
        memory = self._space(caller.space).fabric.memory
        batch = read_batch(memory, store=self.store_id(), space=caller.space, since=since, peer=peer,
                           limit=min(max(1, limit), MAX_BATCH_CHANGES))  # fmt: skip
        return self._sent(caller, batch, bool(batch.notes or batch.forgotten))

    def sync_received(self, caller: Caller, peer: str) -> int:
        """How far this store has applied ``peer``'s changes to the caller's space."""
        return self._position(caller, peer, "notes")

    def sync_changes(self, caller: Caller, *, since: int, peer: str, limit: int = MAX_BATCH_CHANGES) -> dict[str, Any]:
        """:meth:`sync_read` as JSON (what a door sends)."""
        return self.sync_read(caller, since=since, peer=peer, limit=limit).to_json()

    def sync_apply(self, caller: Caller, batch: Batch | Mapping[str, Any], *, label: str) -> Applied:
        """Apply a peer's batch (or its JSON, checked here) to the caller's space: one transaction under
        its write lock, audited."""

        def run() -> Applied:
            checked = _checked(caller, batch, Batch, "changes")
            return apply_batch(self._space(caller.space).fabric.memory, checked, space=caller.space, label=label)

        return self._audited(caller, "sync", "/", run)

    def sync_read_files(self, caller: Caller, *, since: int, peer: str) -> FileBatch:
        """The caller's space's file versions after ``since`` for ``peer``, with their kept bytes."""
        caller.require("afi:admin", path="/")
        batch = read_file_batch(self._space(caller.space), store=self.store_id(), name=caller.space, since=since,
                                peer=peer)  # fmt: skip
        return self._sent(caller, batch, bool(batch.versions))

    def sync_file_changes(self, caller: Caller, *, since: int, peer: str) -> dict[str, Any]:
        """:meth:`sync_read_files` as JSON (what a door sends)."""
        return self.sync_read_files(caller, since=since, peer=peer).to_json()

    def sync_received_files(self, caller: Caller, peer: str) -> int:
        """How far this store has applied ``peer``'s file versions to the caller's space."""
        return self._position(caller, peer, "files")

    def sync_apply_files(self, caller: Caller, batch: FileBatch | Mapping[str, Any], *, label: str) -> FilesApplied:
        """Add a peer's file versions to the caller's space in one transaction (audited, under its write
        lock), then bring the paths they touched on disk to their newest version."""
        space = self._space(caller.space)

        def run() -> FilesApplied:
            checked = _checked(caller, batch, FileBatch, "files")
            with self._db.transaction() as conn:
                return apply_file_batch(space, conn, checked, name=caller.space, label=label)

        applied = self._audited(caller, "sync", "/", run)
        with self._write_locks.hold(caller.space):
            return check_out(space, caller.space, applied)

    def sync_read_ledger(self, caller: Caller, *, since: int, peer: str) -> LedgerBatch:
        """The caller's space's ledger entries after ``since`` for ``peer`` (leaving out what came from it)."""
        caller.require("afi:admin", path="/")
        batch = read_ledger_batch(self._db, store=self.store_id(), space=caller.space, since=since, peer=peer)
        return self._sent(caller, batch, bool(batch.entries))

    def sync_ledger_changes(self, caller: Caller, *, since: int, peer: str) -> dict[str, Any]:
        """:meth:`sync_read_ledger` as JSON (what a door sends)."""
        return self.sync_read_ledger(caller, since=since, peer=peer).to_json()

    def sync_received_ledger(self, caller: Caller, peer: str) -> int:
        """How far this store has applied ``peer``'s ledger entries to the caller's space."""
        return self._position(caller, peer, "ledger")

    def sync_apply_ledger(self, caller: Caller, batch: LedgerBatch | Mapping[str, Any], *,
                          label: str) -> LedgerApplied:  # fmt: skip
        """Add a peer's ledger entries to the caller's space in one transaction, audited."""

        def run() -> LedgerApplied:
            checked = _checked(caller, batch, LedgerBatch, "entries")
            with self._db.transaction() as conn:
                return apply_ledger_batch(self._db, conn, checked, space=caller.space, label=label)

        return self._audited(caller, "sync", "/", run)

    def sync_read_state(self, caller: Caller) -> SpaceState:
        """The caller's space's working blocks and snapshots, as a sync sends them."""
        caller.require("afi:admin", path="/")
        return read_space_state(self._db, store=self.store_id(), space=caller.space)

    def sync_state(self, caller: Caller) -> dict[str, Any]:
        """:meth:`sync_read_state` as JSON (what a door sends)."""
        return self.sync_read_state(caller).to_json()

    def sync_apply_state(self, caller: Caller, state: SpaceState | Mapping[str, Any]) -> StateApplied:
        """Merge a peer's working blocks and snapshots into the caller's space (one transaction under
        its write lock, audited)."""

        def run() -> StateApplied:
            checked = _checked(caller, state, SpaceState, "blocks and snapshots")
            with self._db.transaction() as conn:
                return apply_space_state(conn, checked, space=caller.space, held=self._space(caller.space))

        return self._audited(caller, "sync", "/", run)

    def _position(self, caller: Caller, peer: str, stream: str) -> int:
        """How far this store has applied ``peer``'s ``stream`` (notes, files, ledger) to the caller's space."""
        caller.require("afi:admin", path="/")
        with self._db.read() as conn:
            return received(conn, caller.space, peer, stream=stream)

    def _sent(self, caller: Caller, batch: T, holds: bool) -> T:
        """A batch read for a peer, audited (``sync.send``) when it carries something: a sync is on
        the record of both stores, the one that sent as well as the one that applied."""
        if holds:
            self.audit.record(caller, "sync.send", "/", "ok")
        return batch

    def sync_status(self, caller: Caller) -> builtins.list[dict[str, Any]]:
        """The stores the caller's space has synced with, most recent first (needs afi:admin)."""
        caller.require("afi:admin", path="/")
        return [{"store": p.peer, "label": p.label, "synced_at": p.synced_at, "received": p.received}
                for p in peers(self._db, caller.space)]  # fmt: skip

    def sync_peers(self, space: str | None = None) -> builtins.list[Peer]:
        """The stores each space (or one) has synced with, most recent first."""
        return peers(self._db, space)


class _Received(Protocol):
    space: str

    @classmethod
    def from_json(cls, data: Any) -> Self: ...


R = TypeVar("R", bound=_Received)


def _checked(caller: Caller, sent: Any, kind: type[R], what: str) -> R:
    """What a peer sent, as ``kind`` (its JSON checked), for the caller's space only (needs afi:admin)."""
    caller.require("afi:admin", path="/")
    checked = sent if isinstance(sent, kind) else kind.from_json(sent)
    if checked.space != caller.space:
        raise InvalidPath(f"the peer sent {what} of space {checked.space!r}, not of {caller.space!r}")
    return checked
