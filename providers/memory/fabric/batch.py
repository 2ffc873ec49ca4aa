"""A many-note remember: a batch of notes checked whole, embedded in one call, written in one transaction.

Imports and agents that write in bursts pay for a remember's fixed costs once a batch instead of once
a note: the embedder runs over every text at once (a sentence model embeds a batch far faster than
the same texts one by one), and the notes commit together (one commit, one lock, one audit row at
the provider). What each note does inside the transaction is a single remember's, in order: it folds
into the notes already stored and into the batch's earlier notes, as if each had been remembered on
its own one after the other.

All or nothing: every item is checked before anything is embedded (a bad one refuses the batch, its
message naming the item, ``notes[3]: ...``), and a refusal met while writing (a name another note
holds, a window that cannot start) rolls the whole transaction back. A batch holds at most
:data:`MAX_BATCH_NOTES` notes and :data:`MAX_BATCH_BYTES` bytes (docs/limits.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from afi.errors import AfiError

from .backlog import LATER
from .batch_fold import plain_items
from .embedders import embedding_text
from .errors import MemoryLimitError, MemoryValidationError
from .types import MemoryNote

if TYPE_CHECKING:
    from .fabric import MemoryFabric

__all__ = [
    "BATCH_KINDS",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_NOTES",
    "Pending",
    "check_batch",
    "item_bytes",
    "naming",
    "remember_many",
]

# a batch holds the write lock while it folds and writes: 500 notes took about 4 s at 100k notes on a busy
# 2-core machine, within the 5 s another SQLite writer waits (docs/decisions/0019-many-note-remember.md)
MAX_BATCH_NOTES = 500
MAX_BATCH_BYTES = 4 * 1024 * 1024
# the kinds stored as rows; a working block and an episode are written (or read) one at a time
BATCH_KINDS = ("fact", "procedure", "file")


@dataclass(frozen=True)
class Pending:
    """A checked remember of a stored kind, not yet embedded nor written: the note as it would be
    inserted, the instant it was checked at, whether it names its id, and whether it may fold."""

    note: MemoryNote
    now: str
    explicit_id: bool
    folding: bool


def item_bytes(item: Mapping[str, Any]) -> int:
    """Given one batch item, return what it counts against :data:`MAX_BATCH_BYTES`: its size as
    compact UTF-8 JSON (what a door receives for it)."""
    return len(json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=str).encode())


@contextmanager
def naming(index: int) -> Iterator[None]:
    """Re-raise an AfiError met on item ``index`` as the same error, its message prefixed ``notes[i]: ``."""
    try:
        yield
    except AfiError as err:
        raise type(err)(f"notes[{index}]: {err.message}", path=err.path) from None


def check_batch(notes: Any) -> list[Mapping[str, Any]]:
    """Given a batch, return its items once its shape and size are within the limits.

    Raises MemoryValidationError for a batch that is not a list of mappings, MemoryLimitError past
    :data:`MAX_BATCH_NOTES` or :data:`MAX_BATCH_BYTES`.
    """
    if not isinstance(notes, Sequence) or isinstance(notes, (str, bytes)):
        raise MemoryValidationError("notes must be a list of notes, each a mapping of remember's fields")
    if len(notes) > MAX_BATCH_NOTES:
        raise MemoryLimitError(f"a batch holds at most {MAX_BATCH_NOTES:,} notes; this one has {len(notes):,}")
    size = 0
    for index, item in enumerate(notes):
        if not isinstance(item, Mapping):
            raise MemoryValidationError(f"notes[{index}]: a note is a mapping of remember's fields")
        size += item_bytes(item)
        if size > MAX_BATCH_BYTES:
            raise MemoryLimitError(
                f"a batch holds at most {MAX_BATCH_BYTES:,} bytes of JSON; notes[0..{index}] already hold {size:,}"
            )
    return list(notes)


def remember_many(fabric: MemoryFabric, notes: Any) -> list[MemoryNote]:
    """Check, embed and write a batch of notes (see the module); return the notes written, in order
    (for a folded item, the surviving row)."""
    items = check_batch(notes)
    pending: list[Pending] = []
    for index, item in enumerate(items):
        with naming(index):
            pending.append(_pending(fabric, item))
    if not pending:
        return []
    memory = fabric.memory
    trailing = memory.trailing
    texts = [embedding_text(p.note) for p in pending]
    embeddings: Sequence[Any] = [LATER] * len(texts) if trailing else list(memory.embedder.embed(texts))
    out: list[MemoryNote] = []
    with memory.store.write(memory.scope):
        plain = plain_items(fabric, pending, embeddings) if fabric.fold_together else set()
        queued: list[int] = []
        for index, (waiting, embedding) in enumerate(zip(pending, embeddings, strict=True)):
            if index in plain:
                queued.append(index)
                continue
            out.extend(_inserted(fabric, [pending[at] for at in queued], [embeddings[at] for at in queued]))
            queued.clear()
            with naming(index):
                out.append(fabric._stored(waiting, embedding))
        out.extend(_inserted(fabric, [pending[at] for at in queued], [embeddings[at] for at in queued]))
    if trailing:
        trailing.wrote(note.id for note in out)
    return out


def _inserted(fabric: MemoryFabric, pending: Sequence[Pending], embeddings: Sequence[Any]) -> list[MemoryNote]:
    """Insert notes that fold into nothing (:func:`~.batch_fold.plain_items`) in a few statements, each
    as a single remember would have: stamped at the scope's present when that is later, named by its id."""
    if not pending:
        return []
    memory = fabric.memory
    held = memory.present()
    notes = [
        p.note.model_copy(update={"name": p.note.id,
                                  **({"ingested_at": held, "created_at": held} if held > p.now else {})})
        for p in pending
    ]  # fmt: skip
    memory.store.insert_notes(memory.scope, notes, embeddings)
    return notes


def _pending(fabric: MemoryFabric, item: Mapping[str, Any]) -> Pending:
    given = dict(item)
    kind = given.pop("kind", None)
    consolidate = given.pop("consolidate", None)
    if kind not in BATCH_KINDS:
        if kind in ("working", "episode"):
            raise MemoryValidationError(
                f"a batch remembers {', '.join(BATCH_KINDS)} notes; a {kind} note is remembered on its own"
            )
        raise MemoryValidationError(f"kind must be one of {', '.join(BATCH_KINDS)}, not {kind!r}")
    fields, now = fabric._checked(kind, consolidate, given)
    return fabric._pending(kind, fields, now, consolidate)
