"""The fabric's reads of stored notes: one by id, one by kind and name or by file path, and every
note valid at an instant (docs/memory-fabric.md). Mixed into :class:`.fabric.MemoryFabric`."""

from __future__ import annotations

from typing import Any

from .errors import MemoryValidationError
from .fields import canonical_time
from .memory import Memory
from .rows import NAMED, file_name
from .types import NOTE_KINDS, MemoryNote
from .working import read_blocks

__all__ = ["VALID_NOW", "NoteReads"]

VALID_NOW = "(valid_from IS NULL OR valid_from <= ?) AND (valid_to IS NULL OR valid_to > ?)"


class NoteReads:
    """Reads of one Memory's notes (``self.memory``), as they stand at an instant."""

    memory: Memory

    def get(self, id: str) -> MemoryNote | None:
        """Return any row of the scope with that id (superseded/expired included), or its working
        block; None when absent, forgotten or held."""
        rows = self.memory.store.select_notes(self.memory.scope, "id = ? AND status = 'active'", (id,))
        if rows:
            return rows[0]
        return next((note for note in read_blocks(self.memory).values() if note.id == id), None)

    def find(self, kind: str, name: str, *, as_of: Any = None) -> MemoryNote | None:
        """Return the note of that kind and name valid at ``as_of`` (default now), or None."""
        if kind == "working":
            return read_blocks(self.memory).get(name)
        at = self.memory.present() if as_of is None else canonical_time(as_of, "as_of")
        rows = self.memory.store.select_notes(
            self.memory.scope, f"kind = ? AND {NAMED} AND status = 'active' AND {VALID_NOW}",
            (kind, file_name(name), at, at), order="seq DESC", limit=1,
        )  # fmt: skip
        return rows[0] if rows else None

    def find_file(self, path: str, *, as_of: str | None = None) -> MemoryNote | None:
        """Return the file note of a workspace path current at ``as_of`` (default now), or None."""
        now = as_of or self.memory.present()
        rows = self.memory.store.select_notes(
            self.memory.scope, f"kind = 'file' AND path = ? AND status = 'active' AND {VALID_NOW}",
            (path, now, now), order="seq DESC", limit=1,
        )  # fmt: skip
        return rows[0] if rows else None

    def notes(self, *, kinds: Any = None, as_of: Any = None, include_invalid: bool = False) -> list[MemoryNote]:
        """Return the notes valid at ``as_of`` (default now), or with ``include_invalid`` every stored
        version, sorted by id; ``working`` in ``kinds`` adds the live blocks."""
        wanted = list(kinds) if kinds is not None else ["fact", "procedure", "file"]
        for kind in wanted:
            if kind not in NOTE_KINDS:
                raise MemoryValidationError(f"unknown memory note kind: {kind!r}")
        stored = [k for k in wanted if k in ("fact", "procedure", "file")]
        out: list[MemoryNote] = []
        if stored:
            where = f"kind IN ({', '.join('?' * len(stored))}) AND status = 'active'"
            params: list[Any] = list(stored)
            if not include_invalid:
                at = self.memory.present() if as_of is None else canonical_time(as_of, "as_of")
                where += f" AND {VALID_NOW}"
                params += [at, at]
            out = self.memory.store.select_notes(self.memory.scope, where, params)
        if "working" in wanted:
            out += list(read_blocks(self.memory).values())
            out.sort(key=lambda n: n.id)
        return out
