"""The memory fabric's typed results: notes, recall hits, explain rows, forget results.

Field names are those of docs/memory-fabric.md, "Note fields". Timestamps are ISO 8601 UTC
strings with milliseconds (``2026-01-01T00:00:00.000Z``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "NOTE_KINDS",
    "RECALLABLE_KINDS",
    "WON_OVER",
    "ExplainRow",
    "ForgetResult",
    "MemoryNote",
    "NoteKind",
    "NoteLink",
    "PromotedFrom",
    "RecallHit",
    "RecallResult",
    "Scope",
    "won_over",
]

NoteKind = Literal["fact", "procedure", "file", "working", "episode"]
NOTE_KINDS: tuple[str, ...] = ("fact", "procedure", "file", "working", "episode")
RECALLABLE_KINDS: tuple[str, ...] = ("fact", "procedure", "file", "episode")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Scope(_Model):
    """Where a note lives: tenant, resource (an AFI space) and thread."""

    tenant_id: str
    resource_id: str
    thread_id: str


class NoteLink(_Model):
    """An edge to another note (12-hex id); the linker writes ``related`` edges weighted by similarity."""

    id: str
    relation: str = "related"
    weight: float | None = None


# the relation a sync's settled conflict links the version that stayed current to each one it retired
# (sync/apply.py): the conflict is open while that version is current (tree/conflicts.py)
WON_OVER = "won_over"


def won_over(note: MemoryNote) -> list[str]:
    """Given a version, return the ids of the versions it won over in a sync's conflict, in link order."""
    return [link.id for link in note.links if link.relation == WON_OVER]


class PromotedFrom(_Model):
    reflection_id: str
    scope_id: str


class MemoryNote(_Model):
    """One stored note (or, for ``episode``, a view); what ``remember`` returns."""

    id: str
    kind: NoteKind
    content: str
    name: str | None = None
    ingested_at: str
    created_at: str
    updated_at: str | None = None
    token_count: int
    t_ref: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    supersedes: str | None = None
    links: list[NoteLink] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    context: str | None = None
    importance: float | None = None
    source_entry_ids: list[str] = Field(default_factory=list)
    path: str | None = None
    block: str | None = None
    promoted_from: PromotedFrom | None = None
    consent: dict[str, Any] | None = None
    status: Literal["active", "forgotten", "legal_hold"] = "active"
    forgotten_at: str | None = None
    scope: Scope | None = None


class RecallHit(MemoryNote):
    """A recalled note with its score; ``similarity``/``recency`` are set when scoring was requested."""

    score: float
    similarity: float | None = None
    recency: float | None = None


class ExplainRow(_Model):
    """Why ``hits[i]`` is there: scores and provenance flags only, never the query text."""

    id: str
    score: float
    similarity: float | None = None
    recency: float | None = None
    importance: float | None = None
    cosine: float | None = None
    dated: float | None = None
    adjacent: float | None = None
    link: bool = False
    valid: bool = True


class RecallResult(_Model):
    hits: list[RecallHit]
    explain: list[ExplainRow]
    # notes of the scope written moments ago whose vectors are still being made: this recall could
    # find them by their words only (None: every note had its vector)
    vectors_pending: int | None = None


class ForgetResult(_Model):
    id: str | None = None
    block: str | None = None
    deleted: int
    held: bool
