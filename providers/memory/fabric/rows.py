"""Notes as rows of the store: the columns a note is stored in, and the conversions both ways."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .types import MemoryNote, NoteLink, PromotedFrom, Scope

__all__ = [
    "INSERT_CHANGE",
    "NAMED",
    "NOTE_COLUMNS",
    "change_row",
    "consent_state",
    "file_name",
    "iso_now",
    "iso_to_epoch",
    "json_list",
    "note_from_row",
    "note_state",
    "scope_lock_key",
]

_JSON_FIELDS = ("links", "tags", "keywords", "source_entry_ids", "promoted_from", "consent")
NOTE_COLUMNS = (
    "id", "kind", "name", "content", "ingested_at", "created_at", "updated_at", "token_count", "t_ref",
    "valid_from", "valid_to", "supersedes", "links", "tags", "keywords", "context", "importance",
    "source_entry_ids", "path", "block", "promoted_from", "consent", "status", "forgotten_at",
)  # fmt: skip
_SELECT = ", ".join(("rowid", "seq", *NOTE_COLUMNS))
# what the vector index keeps of a row (see vectors.py)
_INDEX_SELECT = "rowid, id, kind, valid_from, valid_to, consent, source_entry_ids, status, embedding"


# A note by name, in the words of the file-name index (``name || '.md'``), the one index of names both
# engines have; the parameter is :func:`file_name` of the name
NAMED = "name IS NOT NULL AND name || '.md' = ?"


def file_name(name: str | None) -> str | None:
    """The parameter :data:`NAMED` takes for a name."""
    return None if name is None else name + ".md"


def iso_now() -> str:
    """Return the current UTC time as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# A change of a note, stamped with the writer's wall clock or the scope's last stamp when that is later:
# the stamps never go back, so the newest one is the scope's clock (clock.py), whatever wrote last
# (``origin``: the store a synced change came from, NULL for a change made here)
INSERT_CHANGE = (
    "INSERT INTO note_changes (tenant_id, resource_id, thread_id, note_id, op, origin, stamp) "
    "VALUES (?, ?, ?, ?, ?, ?, COALESCE((SELECT CASE WHEN c.stamp > ? THEN c.stamp END FROM note_changes c "
    "WHERE c.tenant_id = ? AND c.resource_id = ? AND c.thread_id = ? ORDER BY c.seq DESC LIMIT 1), ?))"
)


def change_row(key: tuple[str, str, str], note_id: str, op: str, origin: str | None = None) -> tuple[str | None, ...]:
    """The parameters of :data:`INSERT_CHANGE` for one change of a note of the scope ``key``: ``op`` is
    ``upsert``, ``delete`` (a forget) or ``gc`` (a retired version dropped by ``afi gc``)."""
    wall = iso_now()
    return (*key, note_id, op, origin, wall, *key, wall)


def _scope_key(scope: Scope) -> tuple[str, str, str]:
    return (scope.tenant_id, scope.resource_id, scope.thread_id)


def scope_lock_key(scope: Scope) -> int:
    """The 64-bit PostgreSQL advisory lock key of a scope's note writes (a hash of the scope)."""
    name = "\x00".join(("afi-scope", *_scope_key(scope))).encode()
    return int.from_bytes(hashlib.blake2b(name, digest_size=8).digest(), "big", signed=True)


def note_from_row(row: Sequence[Any], scope: Scope | None = None) -> MemoryNote:
    """Given a row selected as ``rowid, seq, *NOTE_COLUMNS``, return the MemoryNote it stores."""
    data: dict[str, Any] = dict(zip(NOTE_COLUMNS, row[2:], strict=True))
    for key in _JSON_FIELDS:
        raw = data[key]
        data[key] = json.loads(raw) if raw is not None else None
    data["links"] = [NoteLink(**link) for link in data["links"] or []]
    data["tags"] = data["tags"] or []
    data["keywords"] = data["keywords"] or []
    data["source_entry_ids"] = data["source_entry_ids"] or []
    if data["promoted_from"] is not None:
        data["promoted_from"] = PromotedFrom(**data["promoted_from"])
    return MemoryNote(**data, scope=scope)


def note_state(note: MemoryNote) -> dict[str, Any]:
    """Given a note, return every stored field (:data:`NOTE_COLUMNS`, in their order) as JSON values: what
    a bundle's front matter and a sync's batch carry of a version."""
    state: dict[str, Any] = {}
    for key in NOTE_COLUMNS:
        value = getattr(note, key)
        if key == "links":
            value = [link.model_dump(exclude_none=True) for link in value]
        elif key == "promoted_from" and value is not None:
            value = value.model_dump()
        state[key] = value
    return state


_JSON_AT = tuple((NOTE_COLUMNS.index(key), key) for key in _JSON_FIELDS)


def _note_values(note: MemoryNote) -> list[Any]:
    values: list[Any] = [getattr(note, key) for key in NOTE_COLUMNS]
    for at, key in _JSON_AT:
        value = values[at]
        if not value:  # None, or an empty list or mapping: NULL, as for a note without it
            values[at] = None if value is None or isinstance(value, list) else json.dumps(value, separators=(",", ":"))
            continue
        if key == "links":
            value = [link.model_dump(exclude_none=True) for link in value]
        elif key == "promoted_from":
            value = value.model_dump()
        values[at] = json.dumps(value, separators=(",", ":"))
    return values


def iso_to_epoch(value: str | None, default: float) -> float:
    """Given an ISO timestamp (or None), return epoch seconds (or the default)."""
    if value is None:
        return default
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def consent_state(raw: str | None) -> int:
    """Given a stored consent JSON, return 0 (none), 1 (granted and visible) or 2 (hidden)."""
    if raw is None:
        return 0
    consent = json.loads(raw)
    if not isinstance(consent, dict) or consent.get("visible") is False or consent.get("revoked_at"):
        return 2
    return 1


def json_list(raw: str | None) -> list[str]:
    """Given a stored JSON list (or None), return it (an empty list for None or ``[]``)."""
    return json.loads(raw) if raw and raw != "[]" else []
