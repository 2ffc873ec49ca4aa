"""Notes from the observational source (the ledger): episode views, and reflections promoted to procedures."""

from __future__ import annotations

from typing import Any

from .errors import MemoryNotFoundError, MemoryValidationError
from .memory import Memory
from .recall import estimate_tokens
from .rows import iso_now
from .types import MemoryNote, PromotedFrom

__all__ = ["episode_from", "promoted_reflection"]


def episode_from(memory: Memory, source: Any, f: dict[str, Any]) -> MemoryNote:
    """An episode note: a view of one observation of the source (it writes nothing)."""
    if source is None:
        raise MemoryValidationError(
            'kind "episode" needs an observational source: create_memory_fabric(memory, observational=...)'
        )
    if f.get("id") is None:
        raise MemoryValidationError('kind "episode" requires the observation id')
    if f.get("content") is not None:
        raise MemoryValidationError('kind "episode" reads its content from the observation; omit content')
    observation = _lookup_observation(source, f["id"])
    if observation is None:
        raise MemoryNotFoundError(f"unknown observation id: {f['id']}")
    text = memory.redact(str(observation.get("content", "")))
    stamp = observation.get("timestamp") or iso_now()
    return MemoryNote(
        id=f["id"], kind="episode", content=text, name=f["id"], ingested_at=stamp, created_at=stamp,
        token_count=int(observation.get("token_count") or estimate_tokens(text)),
        source_entry_ids=list(observation.get("source_entry_ids") or []), importance=f.get("importance"),
        t_ref=f.get("t_ref"), tags=f.get("tags") or [], keywords=f.get("keywords") or [],
        context=f.get("context"), scope=memory.scope,
    )  # fmt: skip


def promoted_reflection(source: Any, reflection_id: str) -> tuple[str, PromotedFrom]:
    """A reflection's content, promoted to a procedure once it is bound to a closed work scope."""
    lookup = getattr(source, "reflection", None)
    if source is None or not callable(lookup):
        raise MemoryValidationError(
            "reflection_id needs an observational source with a reflection(id) lookup; none is configured"
        )
    found = lookup(reflection_id)
    if not isinstance(found, dict) or not isinstance(found.get("content"), str):
        raise MemoryNotFoundError(f"unknown observational memory reflection: {reflection_id}")
    if not found.get("scope_id") or found.get("scope_closed") is not True:
        raise MemoryValidationError(f"reflection {reflection_id} is not bound to a closed work scope")
    return found["content"], PromotedFrom(reflection_id=reflection_id, scope_id=str(found["scope_id"]))


def _lookup_observation(source: Any, obs_id: str) -> dict[str, Any] | None:
    lookup = getattr(source, "observation", None)
    if callable(lookup):
        found = lookup(obs_id)
        return found if isinstance(found, dict) else None
    session = getattr(source, "session", None)
    entries = getattr(session, "entries", None)
    if not callable(entries):
        raise MemoryValidationError("the observational source must expose session.entries()")
    for entry in entries():
        if isinstance(entry, dict) and entry.get("type") == "observation" and entry.get("id") == obs_id:
            return entry
    return None
