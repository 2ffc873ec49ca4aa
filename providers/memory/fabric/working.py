"""Working blocks: labeled notes under ``_fabric.blocks`` of the scope's working value.

Every write is a compare-and-swap on the value's ``version``: a writer that lost the race reads
again and retries, so two concurrent appenders never lose each other's text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from .errors import MemoryConflictError, MemoryLimitError, MemoryValidationError
from .memory import Memory
from .store import iso_now
from .types import MemoryNote

__all__ = [
    "BLOCK_LABEL",
    "append_block",
    "block_digest",
    "block_id",
    "check_label",
    "merged_seen",
    "read_blocks",
    "set_block",
    "tombstone_block",
]

BLOCK_LABEL = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_KEY = "_fabric"
_RETRIES = 64
_SEEN = 64  # digests of earlier states a block remembers (a sync tells an edit from a conflict by them)


def check_label(block: Any) -> str:
    """Given a block label, return it; raise MemoryValidationError unless it matches BLOCK_LABEL."""
    if not isinstance(block, str) or not BLOCK_LABEL.match(block):
        raise MemoryValidationError(f"block must match [a-z0-9][a-z0-9._-]{{0,63}}, got {block!r}")
    return block


def block_id(block: str) -> str:
    """Given a label, return its stable 12-hex note id."""
    return hashlib.sha256(f"fabric\x00working\x00{block}".encode()).hexdigest()[:12]


def block_digest(raw: dict[str, Any]) -> str:
    """A block state's digest (16 hex digits): its text, times and importance, not what it has seen."""
    fields = {k: raw.get(k) for k in ("content", "created_at", "updated_at", "forgotten_at", "importance")}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def merged_seen(*states: dict[str, Any], extra: str | None = None) -> list[str]:
    """The digests the states have seen, and ``extra``: one sorted list, at most :data:`_SEEN` long."""
    seen = {d for state in states for d in state.get("seen", []) if isinstance(d, str)}
    return sorted(seen | ({extra} if extra else set()))[-_SEEN:]


def _blocks_of(value: dict[str, Any]) -> dict[str, Any]:
    fabric = value.get(_KEY)
    blocks = fabric.get("blocks") if isinstance(fabric, dict) else None
    return blocks if isinstance(blocks, dict) else {}


def _note(memory: Memory, label: str, raw: dict[str, Any]) -> MemoryNote | None:
    """A malformed or tombstoned block reads as absent: the fabric never reports content it lacks."""
    if not isinstance(raw, dict) or not isinstance(raw.get("content"), str) or raw.get("forgotten_at"):
        return None
    content = raw["content"]
    return MemoryNote(
        id=raw.get("id") or block_id(label),
        kind="working",
        content=content,
        name=label,
        block=label,
        ingested_at=raw.get("updated_at") or raw.get("created_at") or "",
        created_at=raw.get("created_at") or "",
        updated_at=raw.get("updated_at"),
        token_count=-(-len(content) // 4),
        importance=raw.get("importance"),
        scope=memory.scope,
    )


def read_blocks(memory: Memory) -> dict[str, MemoryNote]:
    """Return the live blocks by label (forgotten and malformed ones left out)."""
    value, _ = memory.store.get_working(memory.scope)
    out: dict[str, MemoryNote] = {}
    for label, raw in sorted(_blocks_of(value).items()):
        note = _note(memory, label, raw)
        if note is not None:
            out[label] = note
    return out


def _update(
    memory: Memory, label: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None],
    expected_version: int | None = None,
) -> tuple[dict[str, Any] | None, int]:  # fmt: skip
    """Apply ``change`` to one block with compare-and-swap; return (new raw block, new version)."""
    for _ in range(_RETRIES):
        value, version = memory.store.get_working(memory.scope)
        if expected_version is not None and version != expected_version:
            raise MemoryConflictError(f"working memory is at version {version}, not {expected_version}")
        blocks = dict(_blocks_of(value))
        current = blocks.get(label)
        updated = change(current if isinstance(current, dict) else None)
        if updated is None:
            return None, version
        if isinstance(current, dict):  # the state it replaces, so a sync reads this as its successor
            seen = [d for d in current.get("seen", []) if isinstance(d, str)] + [block_digest(current)]
            updated = {**updated, "seen": seen[-_SEEN:]}
        blocks[label] = updated
        raw_fabric = value.get(_KEY)
        fabric: dict[str, Any] = raw_fabric if isinstance(raw_fabric, dict) else {}
        new_value = {**value, _KEY: {**fabric, "blocks": blocks}}
        new_version = memory.store.cas_working(memory.scope, new_value, version)
        if new_version is not None:
            return updated, new_version
        if expected_version is not None:
            raise MemoryConflictError(f"working memory changed while writing (expected version {expected_version})")
    raise MemoryConflictError(f"block {label!r} kept changing under concurrent writers; nothing was written")


def set_block(memory: Memory, label: str, content: str, *, importance: float | None = None) -> MemoryNote:
    """Replace a block's content (creating it); return the working note."""
    check_label(label)
    now = iso_now()

    def change(current: dict[str, Any] | None) -> dict[str, Any]:
        live = current is not None and not current.get("forgotten_at")
        created = current.get("created_at") if live and current else now
        out = {"id": block_id(label), "content": content, "created_at": created, "updated_at": now}
        if importance is not None:
            out["importance"] = importance
        return out

    raw, _ = _update(memory, label, change)
    assert raw is not None
    note = _note(memory, label, raw)
    assert note is not None
    return note


def append_block(memory: Memory, label: str, text: str, *, expected_version: int | None = None) -> MemoryNote:
    """Append a line to a block under ``max_entry_text_chars`` (versioned); return the working note.

    Raises MemoryLimitError when the result would exceed the cap (nothing written) and
    MemoryConflictError when ``expected_version`` is given and stale.
    """
    check_label(label)
    if not isinstance(text, str) or not text.strip():
        raise MemoryValidationError("text must be a non-empty string")
    text = memory.redact(text)
    cap = memory.limits.max_entry_text_chars
    now = iso_now()

    def change(current: dict[str, Any] | None) -> dict[str, Any]:
        live = current is not None and not current.get("forgotten_at") and current.get("content")
        content = f"{current['content']}\n{text}" if live and current else text
        if len(content) > cap:
            raise MemoryLimitError(f"block {label!r} would grow to {len(content)} characters (cap {cap})")
        created = current.get("created_at") if live and current else now
        return {"id": block_id(label), "content": content, "created_at": created, "updated_at": now}

    raw, _ = _update(memory, label, change, expected_version)
    assert raw is not None
    note = _note(memory, label, raw)
    assert note is not None
    return note


def tombstone_block(memory: Memory, label: str) -> bool:
    """Clear a block and stamp ``forgotten_at`` (the label is free again); return False if absent."""
    check_label(label)
    now = iso_now()

    def change(current: dict[str, Any] | None) -> dict[str, Any] | None:
        if current is None or current.get("forgotten_at"):
            return None
        return {"id": current.get("id") or block_id(label), "content": "", "forgotten_at": now, "updated_at": now}

    raw, _ = _update(memory, label, change)
    return raw is not None


def working_version(memory: Memory) -> int:
    """Return the scope's working value version (for a caller's compare-and-swap)."""
    return memory.store.get_working(memory.scope)[1]
