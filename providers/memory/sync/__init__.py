"""Sync between stores: a space's note versions and forgets, sent both ways, merged alike on both sides.

:mod:`.batches` reads what changed since a peer last applied it, :mod:`.states` carries a version and
merges two states of one, :mod:`.apply` applies a batch in one transaction and settles names written
on both sides, :mod:`.peers` keeps the store's id and how far each peer got, :mod:`.run` drives the
two directions. docs/sync.md is the user's side of it.
"""

from .apply import Applied, Conflict
from .batches import MAX_BATCH_CHANGES, Batch
from .files import FileBatch, FilesApplied
from .peers import Peer
from .run import Endpoint, LocalEndpoint, SyncReport, Traffic, sync

__all__ = [
    "MAX_BATCH_CHANGES",
    "Applied",
    "Batch",
    "Conflict",
    "Endpoint",
    "FileBatch",
    "FilesApplied",
    "LocalEndpoint",
    "Peer",
    "SyncReport",
    "Traffic",
    "sync",
]
