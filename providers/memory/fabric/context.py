"""The context seam: blocks a host injects, tagged ``working-memory`` and ``semantic-memory``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .memory import Memory, consent_visible
from .types import MemoryNote, RecallResult

__all__ = ["ContextProvider"]


@dataclass(eq=False)
class ContextProvider:
    """Resolves the fabric's context blocks; the same consent and lineage rules as recall apply."""

    memory: Memory
    recall: Callable[..., RecallResult]
    current_notes: Callable[[], list[MemoryNote]]
    blocks_of: Callable[[], dict[str, MemoryNote]]
    include_working: bool = True
    include_semantic: bool = True
    query: str | None = None
    top_k: int | None = None
    name: str = "memory-fabric"

    def blocks(self, query: str | None = None) -> list[dict[str, Any]]:
        """Given an optional query (else the provider's), return the context blocks, working first.

        Semantic blocks are the recall hits for the query, or without one the most recent
        recallable notes, at most ``top_k``.
        """
        out: list[dict[str, Any]] = []
        if self.include_working:
            for label, note in self.blocks_of().items():
                if note.content:
                    out.append({"type": "working-memory", "id": note.id, "label": label, "content": note.content})
        if self.include_semantic:
            top_k = self.top_k or self.memory.limits.top_k
            text = query if query is not None else self.query
            if text is not None and text.strip():
                notes: list[MemoryNote] = list(self.recall(text, top_k=top_k).hits)
            else:
                revoked = self.memory.revoked_sources()
                notes = [
                    note
                    for note in self.current_notes()
                    if consent_visible(note.consent, self.memory.require_consent)
                    and not any(source in revoked for source in note.source_entry_ids)
                ]
                notes.sort(key=lambda n: n.updated_at or n.created_at, reverse=True)
                notes = notes[:top_k]
            for note in notes:
                out.append(
                    {
                        "type": "semantic-memory",
                        "id": note.id,
                        "kind": note.kind,
                        "name": note.name,
                        "content": self.memory.redact(note.content),
                    }
                )
        return out

    __call__ = blocks
