"""Applying a peer's batch to a space: all of it in one transaction under the space's write lock, or none.

Each version the batch carries is inserted when the space lacks it, merged (:func:`.states.merge`) when
it holds another state of it, and left alone when it holds the same. A version this space forgot is
not taken back (a forget wins over an edit), unless the peer holds it under legal hold (a hold wins
over a forget). A forget deletes the version here unless it is held here.

The versions new here are inserted together (:meth:`~..fabric.store.Store.insert_notes`), the others
merged one by one. Then every name and file path the batch touched is settled (:mod:`.settle`) and
the conflicts are reported. Last, the peer's ``upto`` is recorded in the same transaction.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from afi.errors import InvalidPath

from ..bundle.checks import check_note
from ..bundle.layout import NOTE_ID
from ..fabric.embedders import embedding_text
from ..fabric.memory import Memory
from ..fabric.types import MemoryNote
from .batches import Batch
from .peers import record_received
from .settle import Conflict, settle_names, settle_paths
from .states import kept_loser, merge, note_of, state_of

__all__ = ["Applied", "Conflict", "apply_batch"]

# a peer's write stamps may run this far ahead of this store's clock (clocks differ); further is refused
CLOCK_SKEW = timedelta(minutes=10)
_STAMPS = ("ingested_at", "created_at", "updated_at", "forgotten_at")


@dataclass
class Applied:
    """What applying a batch changed here."""

    inserted: int = 0
    merged: int = 0
    deleted: int = 0
    conflicts: list[Conflict] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"inserted": self.inserted, "merged": self.merged, "deleted": self.deleted,
                "conflicts": [vars(c) for c in self.conflicts]}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any) -> Applied:
        """Given what a peer's door answered an apply with, return it; InvalidPath when it is not one."""
        try:
            conflicts = [Conflict(str(c["kind"]), str(c["name"]), str(c["kept"]), str(c["retired"]))
                         for c in data["conflicts"]]  # fmt: skip
            return cls(int(data["inserted"]), int(data["merged"]), int(data["deleted"]), conflicts)
        except (KeyError, TypeError, ValueError):
            raise InvalidPath("the peer answered an apply with something that is not a report of one") from None


def _checked(batch: Batch, memory: Memory) -> list[MemoryNote]:
    """Given a batch, return its notes checked as a bundle's are (ids, times, names, caps) plus the
    stamps no later than this store's clock allows; InvalidPath naming the note at fault otherwise."""
    latest = (datetime.now(UTC) + CLOCK_SKEW).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    notes: list[MemoryNote] = []
    seen: set[str] = set()
    for index, state in enumerate(batch.notes):
        where = f"notes[{index}]"
        note = note_of(state, memory.scope, where)
        if not NOTE_ID.match(note.id) or note.id in seen:
            raise InvalidPath(f"{where}: a version id is 20 hex digits (or 12), once a batch (not {note.id!r})")
        seen.add(note.id)
        if note.kind not in ("fact", "procedure", "file"):
            raise InvalidPath(f"{where}: a synced note is a fact, procedure or file note, not {note.kind!r}")
        check_note(note, where, memory.limits)
        late = [key for key in _STAMPS if (getattr(note, key) or "") > latest]
        if late:
            minutes = int(CLOCK_SKEW.total_seconds() // 60)
            raise InvalidPath(f"{where}: {late[0]} {getattr(note, late[0])} is ahead of this store's clock by more "
                              f"than {minutes} minutes; check the peer's clock")  # fmt: skip
        notes.append(note)
    for note_id in batch.forgotten:
        if not NOTE_ID.match(note_id):
            raise InvalidPath(f"forgotten: a version id is 20 hex digits (or 12), not {note_id!r}")
    return notes


def apply_batch(memory: Memory, batch: Batch, *, space: str, label: str) -> Applied:
    """Apply a peer's batch to ``space`` (``memory``: its memory) and record the peer's ``upto`` there;
    call under the space's write lock. Raises InvalidPath or TooLarge for a batch that is not one,
    Conflict for a version id that names another note here; nothing is written then."""
    notes = _checked(batch, memory)
    store, scope, origin = memory.store, memory.scope, batch.store
    sent = _sent_vectors(batch, store.embedder_name, store.dims)
    vectors: dict[str, Any] = {n.content: sent[n.id] for n in notes if n.id in sent}
    missing = [n for n in notes if n.content not in vectors]
    if missing:
        vectors.update(zip((n.content for n in missing), memory.embedder.embed([embedding_text(n) for n in missing]),
                           strict=True))  # fmt: skip
    applied = Applied()
    with store.write(scope) as conn:
        ids = [n.id for n in notes] + batch.forgotten
        local = {n.id: n for n in _by_ids(memory, ids)}
        forgotten_here = store.forgotten(scope, [n.id for n in notes if n.id not in local])
        # the versions new here go in together (most of a first sync's): a forget here wins unless held there
        new = [n for n in notes if n.id not in local and (n.id not in forgotten_here or n.status == "legal_hold")]
        store.insert_notes(scope, new, [vectors[n.content] for n in new], origin=origin)
        applied.inserted = len(new)
        inserted = {n.id for n in new}
        local.update((n.id, n) for n in new)
        touched = list(new)
        for note in notes:
            mine = local.get(note.id)
            if note.id in inserted or mine is None:  # inserted now, or forgotten here
                continue
            if _merged(memory, note, mine, origin, vectors, local, applied):
                touched.append(note)
        for note_id in batch.forgotten:
            mine = local.get(note_id)
            if mine is not None and mine.status != "legal_hold":
                applied.deleted += store.delete_note(scope, note_id, origin=origin)
            elif mine is not None:
                # a hold here wins over the peer's forget: a change of ours sends the held version back
                store.update_note(scope, mine)
        applied.conflicts += settle_names(memory, ((n.kind, n.name) for n in touched if n.name is not None))
        applied.conflicts += settle_paths(memory, (n.path for n in touched if n.kind == "file" and n.path is not None))
        record_received(conn, space, origin, label, batch.upto)
    return applied


def _merged(memory: Memory, note: MemoryNote, mine: MemoryNote, origin: str, vectors: dict[str, Any],
            local: dict[str, MemoryNote], applied: Applied) -> bool:  # fmt: skip
    """Merge the peer's state of a version (``note``, from the store ``origin``) into ours (``mine``),
    keeping a losing text as a version of its own; return whether ours changed."""
    store, scope = memory.store, memory.scope
    incoming, ours = state_of(note), state_of(mine)
    merged = merge(ours, incoming)
    if merged == ours:
        if incoming != ours:
            # ours won over the peer's (an older state, or a tie of write times broken by the digest,
            # among three stores): say it again, so the peer hears of it at its next sync instead of
            # keeping the state it sent
            store.restate_note(scope, note.id)
        return False

    def vector(of: MemoryNote) -> Any:
        if of.content not in vectors:
            vectors[of.content] = memory.embedder.embed([embedding_text(of)])[0]
        found = vectors[of.content]
        if isinstance(found, bytes):  # as the peer sent it: a vector again for a rewrite
            from ..fabric.vector_bytes import unpack_vector

            found = vectors[of.content] = unpack_vector(found)
        return found

    result = note_of(merged, scope, f"version {note.id}")
    embedding = vector(result) if merged["content"] != ours["content"] else None
    store.update_note(scope, result, embedding, origin=origin if merged == incoming else None)
    local[note.id] = result
    applied.merged += 1
    kept = kept_loser(ours, incoming, merged)
    if kept is not None and kept["id"] not in local and not _by_ids(memory, [kept["id"]]):
        kept_note = note_of(kept, scope, f"version {note.id}")
        store.insert_note(scope, kept_note, vector(kept_note))
        local[kept_note.id] = kept_note
        # one version rewritten on both sides: its losing text is kept, and said
        lost_name = (mine.name if merged["content"] != ours["content"] else note.name) or note.id
        applied.conflicts.append(Conflict(note.kind, lost_name, note.id, kept_note.id))
    return True


def _sent_vectors(batch: Batch, embedder: str, dims: int) -> dict[str, bytes]:
    """The vectors the peer sent, by version id, as this store keeps them, when its embedder is this
    store's (else none: each text is embedded here); InvalidPath for one that is not a vector of this
    embedder's."""
    if batch.embedder != f"{embedder}:{dims}":
        return {}
    from ..fabric.vector_bytes import checked_blob  # here: the modules ``afi ls`` imports stay free of numpy

    out: dict[str, bytes] = {}
    for note_id, text in batch.vectors.items():
        try:
            blob = checked_blob(base64.b64decode(text, validate=True), dims)
        except (binascii.Error, ValueError):
            raise InvalidPath(f"vectors[{note_id[:16]!r}]: not base64 of a stored vector") from None
        if blob is None:
            raise InvalidPath(f"vectors[{note_id[:16]!r}]: not a vector of {dims} finite components")
        out[note_id] = blob
    return out


def _by_ids(memory: Memory, ids: list[str]) -> list[MemoryNote]:
    out: list[MemoryNote] = []
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        out += memory.store.select_notes(memory.scope, f"id IN ({', '.join('?' * len(chunk))})", chunk)
    return out
