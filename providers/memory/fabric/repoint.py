"""File notes follow their files (docs/memory-fabric.md, "Following the file").

A ``file`` note names its document by ``path`` and nothing else, so this is the only place that keeps
notes honest when a workspace file moves or goes away:

- move: every ``kind == "file"`` note of the scope whose path is ``from`` gets ``to``. Id, content,
  embedding and every other field are reused verbatim (nothing is re-embedded or re-scored); the
  rendering is recomputed so the trigram index serves the new path, and a name that followed the old
  path follows the new one.
- delete: the active notes recorded against the path are tombstoned (``forgotten``, or ``legal_hold``
  when a hold was asked for), so recall stops serving them at once.

Both legs select on ``path``, never on content, run in one store transaction, and refuse a handler
built for another scope (MemoryScopeError) rather than write across threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .errors import MemoryScopeError, MemoryValidationError
from .store import iso_now
from .types import MemoryNote, Scope

__all__ = [
    "DeletionPropagator",
    "DeletionReason",
    "FabricRepointHandler",
    "create_deletion_propagator",
    "create_fabric_repoint_handler",
    "repoint_source",
]

DeletionReason = Literal["forgotten", "legal_hold"]
_REASONS = ("forgotten", "legal_hold")


def _check_reason(reason: str) -> DeletionReason:
    if reason not in _REASONS:
        raise MemoryValidationError(f"reason must be 'forgotten' or 'legal_hold', not {reason!r}")
    return reason  # type: ignore[return-value]


def _check_path(value: Any, label: str) -> str:
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise MemoryValidationError(f"{label} must be a non-empty workspace path")
    return value


def _label(scope: Scope) -> str:
    return f"{scope.tenant_id}/{scope.resource_id}/{scope.thread_id}"


class FabricRepointHandler:
    """Moves and tombstones the ``file`` notes of one memory's scope; one handler serves both seams."""

    kind = "fabric"

    def __init__(self, memory: Any, *, reason: DeletionReason = "forgotten") -> None:
        self.scope: Scope = memory.scope
        self.store = memory.store
        self.reason = _check_reason(reason)

    def _check_scope(self, scope: Scope, seam: str) -> None:
        if scope != self.scope:
            raise MemoryScopeError(
                f"this fabric {seam} handler serves {_label(self.scope)}; it refuses a {seam} in {_label(scope)}"
            )

    def _file_notes(self, paths: Sequence[str], *, active_only: bool) -> list[MemoryNote]:
        marks = ", ".join("?" * len(paths))
        where = f"kind = 'file' AND path IN ({marks})" + (" AND status = 'active'" if active_only else "")
        notes: list[MemoryNote] = self.store.select_notes(self.scope, where, list(paths))
        return notes

    def repoint(self, from_path: str, to_path: str, *, scope: Scope) -> int:
        """Given a move within ``scope``, rewrite the path of its file notes; return how many moved."""
        self._check_scope(scope, "repoint")
        moved = 0
        with self.store.write(self.scope):
            for note in self._file_notes([from_path], active_only=False):
                name = to_path if note.name == from_path else note.name
                # update_note without an embedding keeps the stored vector bytes untouched.
                self.store.update_note(self.scope, note.model_copy(update={"path": to_path, "name": name}))
                moved += 1
        return moved

    def delete(self, paths: Sequence[str], *, scope: Scope, reason: DeletionReason) -> int:
        """Given deleted paths within ``scope``, tombstone their active file notes; return how many."""
        self._check_scope(scope, "deletion")
        # A hold asked for on either side wins: a legal hold is never silently downgraded to a deletion.
        status = "legal_hold" if "legal_hold" in (reason, self.reason) else "forgotten"
        at = iso_now()
        retired = 0
        with self.store.write(self.scope):
            for note in self._file_notes(paths, active_only=True):
                self.store.update_note(self.scope, note.model_copy(update={"status": status, "forgotten_at": at}))
                retired += 1
        return retired


def _check_handlers(memory: Any, handlers: Sequence[FabricRepointHandler], seam: str) -> None:
    """Refuse the whole composition before any write when one handler serves another scope or store."""
    for handler in handlers:
        handler._check_scope(memory.scope, seam)
        if handler.store is not memory.store:
            # Two Store objects on one file would nest two write transactions and wait on each other.
            raise MemoryScopeError(f"a fabric {seam} handler must be built on the same memory store")


def create_fabric_repoint_handler(memory: Any, *, reason: DeletionReason = "forgotten") -> FabricRepointHandler:
    """Given a memory, return the handler that moves and tombstones its file notes."""
    return FabricRepointHandler(memory, reason=reason)


def repoint_source(memory: Any, from_path: str, to_path: str, *, handlers: Sequence[FabricRepointHandler]) -> int:
    """Given a workspace move ``from_path`` → ``to_path``, run every handler in one transaction.

    Returns the number of notes moved. Raises MemoryScopeError when a handler serves another scope
    (nothing is written), MemoryValidationError for an empty path.
    """
    _check_path(from_path, "from_path")
    _check_path(to_path, "to_path")
    _check_handlers(memory, handlers, "repoint")
    if from_path == to_path:
        return 0
    with memory.store.write(memory.scope):
        return sum(handler.repoint(from_path, to_path, scope=memory.scope) for handler in handlers)


@dataclass(frozen=True)
class DeletionPropagator:
    """Tombstones the notes recorded against a deleted workspace path, through every handler."""

    memory: Any
    handlers: tuple[FabricRepointHandler, ...]
    reason: DeletionReason = "forgotten"

    def propagate(self, path: str) -> int:
        """Given a deleted path, tombstone its notes in one transaction; return how many.

        Raises MemoryScopeError when a handler serves another scope (nothing is written).
        """
        _check_path(path, "path")
        _check_handlers(self.memory, self.handlers, "deletion")
        with self.memory.store.write(self.memory.scope):
            return sum(h.delete([path], scope=self.memory.scope, reason=self.reason) for h in self.handlers)


def create_deletion_propagator(
    memory: Any, *, handlers: Sequence[FabricRepointHandler], reason: DeletionReason = "forgotten"
) -> DeletionPropagator:
    """Given a memory and its handlers, return the propagator for workspace deletions."""
    return DeletionPropagator(memory, tuple(handlers), _check_reason(reason))
