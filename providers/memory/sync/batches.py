"""What one side of a sync sends: the notes of a space changed since the peer last applied its changes.

A batch is plain JSON (the same over HTTP as between two store files)::

    {"store": <sender's id>, "space": <name>, "since": 41, "upto": 90, "more": true,
     "notes": [<state>, ...], "forgotten": [<version id>, ...]}

``notes`` holds the current state of each version changed after ``since`` (a version changed three
times travels once, as it is now), ``forgotten`` the versions forgotten since (a forget travels as
its id alone; the text is gone). A change the sender applied *from* the receiver is left out, so a
sync does not send a peer back what it just sent. ``upto`` is the sender's last change seq the batch
covers: the receiver records it with the batch, in the same transaction. ``gc``'s drops do not travel:
gc is one store's housekeeping, not a forget.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from afi.errors import InvalidPath, TooLarge

from ..fabric.memory import Memory
from ..fabric.rows import note_from_row
from .states import state_of

__all__ = ["MAX_BATCH_BYTES", "MAX_BATCH_CHANGES", "Batch", "read_batch"]

# changes read a batch: a batch carries at most this many versions (fewer when one changed twice)
MAX_BATCH_CHANGES = 500
# and at most about this many bytes of JSON (fewer changes are read when their notes are long), well
# within what an HTTP door takes in one body
MAX_BATCH_BYTES = 4 * 1024 * 1024


@dataclass
class Batch:
    """One batch of a space's changes, as sent (see the module's docstring)."""

    store: str
    space: str
    since: int
    upto: int
    more: bool
    notes: list[dict[str, Any]] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    # the sender's embedder (``name:dims``) and its vectors by version id, as it stores them (base64):
    # a receiver with the same embedder takes them instead of embedding every text again
    embedder: str = ""
    vectors: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "space": self.space, "since": self.since, "upto": self.upto,
                "more": self.more, "notes": self.notes, "forgotten": self.forgotten, "embedder": self.embedder,
                "vectors": self.vectors}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any) -> Batch:
        """Given a batch as received, return it; InvalidPath naming what is wrong with its shape (each
        note's fields are checked when applied), TooLarge past :data:`MAX_BATCH_CHANGES`."""
        if not isinstance(data, dict):
            raise InvalidPath("a sync batch is a JSON object")
        keys, extra = {"store", "space", "since", "upto", "more", "notes", "forgotten"}, {"embedder", "vectors"}
        if not keys <= set(data) <= keys | extra:
            raise InvalidPath(f"a sync batch holds {', '.join(sorted(keys))} (and embedder, vectors)")
        embedder, vectors = data.get("embedder", ""), data.get("vectors", {})
        if not isinstance(embedder, str) or not isinstance(vectors, dict):
            raise InvalidPath("a sync batch's embedder is a string and its vectors an object")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in vectors.items()):
            raise InvalidPath("a sync batch's vectors map version ids to base64 text")
        if not all(isinstance(data[k], str) and data[k] for k in ("store", "space")):
            raise InvalidPath("a sync batch's store and space are non-empty strings")
        if not all(_seq(data[k]) for k in ("since", "upto")) or data["upto"] < data["since"]:
            raise InvalidPath("a sync batch's since and upto are change numbers, upto not below since")
        if not isinstance(data["more"], bool):
            raise InvalidPath("a sync batch's more is true or false")
        notes, forgotten = data["notes"], data["forgotten"]
        if not isinstance(notes, list) or not isinstance(forgotten, list):
            raise InvalidPath("a sync batch's notes and forgotten are lists")
        if len(notes) + len(forgotten) > MAX_BATCH_CHANGES:
            raise TooLarge(f"a sync batch holds at most {MAX_BATCH_CHANGES} changes; this one has "
                           f"{len(notes) + len(forgotten)}")  # fmt: skip
        if not all(isinstance(note_id, str) for note_id in forgotten):
            raise InvalidPath("a sync batch's forgotten lists version ids")
        return cls(data["store"], data["space"], data["since"], data["upto"], data["more"], notes, forgotten,
                   embedder, vectors)  # fmt: skip


def _seq(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def read_batch(
    memory: Memory, *, store: str, space: str, since: int, peer: str, limit: int = MAX_BATCH_CHANGES
) -> Batch:
    """Given a space's memory, return the batch of its changes after ``since`` for ``peer``: at most
    ``limit`` changes read, fewer when their notes pass :data:`MAX_BATCH_BYTES` (``more`` when there may
    be others)."""
    while True:
        batch = _read(memory, store=store, space=space, since=since, peer=peer, limit=limit)
        if limit == 1 or _size(batch) <= MAX_BATCH_BYTES:
            return batch
        limit = max(1, limit // 2)


def _size(batch: Batch) -> int:
    return len(json.dumps(batch.to_json(), separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _read(memory: Memory, *, store: str, space: str, since: int, peer: str, limit: int) -> Batch:
    store_ = memory.store
    changes = store_.sync_changes(memory.scope, since, limit)
    last: dict[str, tuple[str, str | None]] = {}
    for _, note_id, op, origin in changes:
        last.pop(note_id, None)  # keep the order of each note's last change
        last[note_id] = (op, origin)
    upto = changes[-1][0] if changes else since
    batch = Batch(store, space, since, upto, more=len(changes) == limit)
    wanted = [note_id for note_id, (op, origin) in last.items() if op == "upsert" and origin != peer]
    batch.forgotten = [note_id for note_id, (op, origin) in last.items() if op == "delete" and origin != peer]
    by_id = {}
    batch.embedder = f"{store_.embedder_name}:{store_.dims}"
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        for row in store_.rows_with_embeddings(memory.scope, f"id IN ({', '.join('?' * len(chunk))})", chunk):
            note = note_from_row(row[:-1], memory.scope)
            by_id[note.id] = note
            if row[-1] is not None:
                batch.vectors[note.id] = base64.b64encode(bytes(row[-1])).decode()
    # a version deleted since its change was read is left out: its forget comes in a later batch
    batch.notes = [state_of(by_id[note_id]) for note_id in wanted if note_id in by_id]
    return batch
