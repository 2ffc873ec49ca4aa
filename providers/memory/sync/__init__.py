"""Sync between stores: a space's note versions and forgets, sent both ways, merged alike on both sides.

:mod:`.batches` reads what changed since a peer last applied it, :mod:`.states` carries a version and
merges two states of one, :mod:`.apply` applies a batch in one transaction, :mod:`.settle` settles names
written on both sides, :mod:`.files` and :mod:`.ledger` carry the workspace's file versions and the ledger's entries,
:mod:`.space_state` the working blocks and snapshots, :mod:`.peers` keeps the store's id and how far
each peer got, :mod:`.run` drives the two directions. docs/sync.md is the user's side of it.
"""

from .apply import Applied, Conflict
from .batches import MAX_BATCH_CHANGES, Batch
from .files import FileBatch, FilesApplied
from .ledger import LedgerApplied, LedgerBatch
from .peers import Peer
from .run import Endpoint, LocalEndpoint, SyncReport, Traffic, sync
from .space_state import SpaceState, StateApplied

__all__ = [
    "MAX_BATCH_CHANGES",
    "Applied",
    "Batch",
    "Conflict",
    "Endpoint",
    "FileBatch",
    "FilesApplied",
    "LedgerApplied",
    "LedgerBatch",
    "LocalEndpoint",
    "Peer",
    "SpaceState",
    "StateApplied",
    "SyncReport",
    "Traffic",
    "sync",
]
