"""Fabric settings and the two opt-in workers (linker, evolution).

Both workers run inline after a write, only while a session is attached and ``passive`` is off;
they read the candidate batch the write already fetched and call no model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .consolidate import DEFAULT_THRESHOLD, FoldCandidate, union
from .errors import MemoryValidationError
from .fields import MAX_LIST_ITEMS
from .memory import Memory
from .types import NoteLink

__all__ = ["FabricSettings", "evolve_neighbors", "link_neighbors", "resolve_settings"]

DEFAULT_LINKER_TOP_K = 3
HARD_LINK_CAP = 32
DEFAULT_MAX_PATCHES = 4
DEFAULT_MAX_RESULT_BYTES = 16 * 1024


@dataclass(frozen=True)
class WorkerToggle:
    enabled: bool
    limit: int


@dataclass(frozen=True)
class FabricSettings:
    """What a fabric resolved at creation: consolidation, workers, passive, worker byte caps."""

    consolidate: bool
    threshold: float
    linker: WorkerToggle
    evolution: WorkerToggle
    passive: bool
    max_patches_per_write: int
    max_result_bytes: int


def _flag(value: Any, label: str, keys: set[str]) -> tuple[bool, dict[str, Any]]:
    if value is None:
        return False, {}
    if isinstance(value, bool):
        return value, {}
    if isinstance(value, dict):
        unknown = sorted(set(value) - keys - {"enabled"})
        if unknown:
            raise MemoryValidationError(f"unknown {label} option(s): {', '.join(unknown)}")
        enabled = value.get("enabled", True)
        if not isinstance(enabled, bool):
            raise MemoryValidationError(f"{label}.enabled must be a boolean")
        return enabled, value
    raise MemoryValidationError(f"{label} must be a boolean or an options dict")


def _bounded(value: Any, default: int, label: str, cap: int = HARD_LINK_CAP) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
        raise MemoryValidationError(f"{label} must be an integer in 1..{cap}")
    return value


def resolve_settings(consolidate: Any, linker: Any, evolution: Any, passive: Any, worker_limits: Any) -> FabricSettings:
    """Given create_memory_fabric's options, return FabricSettings; bad options fail loudly."""
    if not isinstance(passive, bool):
        raise MemoryValidationError("passive must be a boolean")
    limits = worker_limits or {}
    if not isinstance(limits, dict) or set(limits) - {"max_patches_per_write", "max_result_bytes"}:
        raise MemoryValidationError("worker_limits accepts max_patches_per_write and max_result_bytes")
    patches = _bounded(limits.get("max_patches_per_write"), DEFAULT_MAX_PATCHES, "max_patches_per_write")
    result_bytes = _bounded(limits.get("max_result_bytes"), DEFAULT_MAX_RESULT_BYTES, "max_result_bytes", 1 << 20)
    if consolidate is None:
        consolidate = True
    on, options = _flag(consolidate, "consolidate", {"threshold"})
    threshold = options.get("threshold", DEFAULT_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
        raise MemoryValidationError("consolidate.threshold must be a number in [0,1]")
    link_on, link_options = _flag(linker, "linker", {"top_k"})
    evo_on, evo_options = _flag(evolution, "evolution", {"max_patches"})
    return FabricSettings(
        consolidate=on,
        threshold=float(threshold),
        linker=WorkerToggle(link_on, _bounded(link_options.get("top_k"), DEFAULT_LINKER_TOP_K, "linker.top_k")),
        evolution=WorkerToggle(evo_on, _bounded(evo_options.get("max_patches"), patches, "evolution.max_patches")),
        passive=passive,
        max_patches_per_write=patches,
        max_result_bytes=result_bytes,
    )


def link_neighbors(candidates: list[FoldCandidate], top_k: int, exclude: set[str]) -> list[NoteLink]:
    """Return ``related`` links to the closest candidates, weight = cosine clamped to [0,1]."""
    links: list[NoteLink] = []
    for cand in candidates:
        if cand.note.id in exclude:
            continue
        weight = round(min(1.0, max(0.0, cand.cosine)), 4)
        if weight <= 0:
            continue
        links.append(NoteLink(id=cand.note.id, relation="related", weight=weight))
        if len(links) >= top_k:
            break
    return links


def evolve_neighbors(
    memory: Memory,
    candidates: list[FoldCandidate],
    *,
    keywords: list[str],
    context: str | None,
    max_patches: int,
    max_bytes: int,
    exclude: set[str],
    now: str,
) -> int:
    """Union the new note's keywords into neighbours and fill a missing context (stamped ``now``, the
    write's time); return how many neighbours were rewritten. Content, validity, consent and sources
    are never touched."""
    patched = 0
    for cand in candidates:
        if patched >= max_patches:
            break
        note = cand.note
        if note.id in exclude:
            continue
        merged = union(note.keywords, keywords)
        new_context = note.context if note.context is not None else context
        if merged == note.keywords and new_context == note.context:
            continue
        if len(merged) > MAX_LIST_ITEMS:
            continue  # at the keyword cap: the neighbour keeps its annotations
        payload = json.dumps({"keywords": merged, "context": new_context}).encode()
        if len(payload) > max_bytes:
            continue  # over the worker byte budget: the neighbour keeps its annotations
        updated = note.model_copy(update={"keywords": merged, "context": new_context, "updated_at": now})
        memory.store.update_note(memory.scope, updated)
        patched += 1
    return patched
