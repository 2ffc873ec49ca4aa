"""The ledger's records: the entries of a branch and what they make (observations,
reflections, work scopes), and the checks every append runs on its input."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..fabric.errors import MemoryValidationError
from ..fabric.fields import ID_DIGITS, canonical_time

__all__ = ["MAX_ID_CHARS", "MAX_TEXT_CHARS", "ROLES", "LedgerEntry", "Observation", "Reflection", "WorkScope"]

ROLES = ("user", "assistant", "tool", "system")
MAX_ID_CHARS = 200
MAX_TEXT_CHARS = 64_384


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LedgerEntry(_Model):
    """One entry of a branch; ``position`` is its place in the branch (0-based)."""

    id: str
    type: str
    timestamp: str
    position: int
    role: str | None = None
    text: str = ""
    ref: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Return the entry as ``session.entries()`` yields it (messages; om.* records with their id)."""
        if self.type == "message":
            return {"type": "message", "id": self.id, "role": self.role, "text": self.text,
                    "timestamp": self.timestamp}  # fmt: skip
        out: dict[str, Any] = {"type": self.type, "id": self.ref, "entry_id": self.id, "timestamp": self.timestamp}
        if self.type in ("observation", "reflection"):
            out["content"] = self.text
        elif self.type == "om.scope.open":
            out["name"] = self.text
        return out | self.data


class Observation(_Model):
    id: str
    session_id: str
    content: str
    timestamp: str
    entry_id: str
    source_entry_ids: list[str] = Field(default_factory=list)
    folded_into: list[str] = Field(default_factory=list)


class Reflection(_Model):
    id: str
    session_id: str
    content: str
    timestamp: str
    entry_id: str
    observation_ids: list[str] = Field(default_factory=list)
    scope_id: str | None = None
    scope_closed: bool = False


class WorkScope(_Model):
    id: str
    session_id: str
    name: str
    opened_at: str
    closed_at: str | None = None

    @property
    def closed(self) -> bool:
        return self.closed_at is not None


def _text(value: Any, label: str, *, cap: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str) or not value.strip():
        raise MemoryValidationError(f"{label} must be a non-empty string")
    if len(value) > cap:
        raise MemoryValidationError(f"{label} is {len(value)} characters; the cap is {cap}")
    return value


def _new_id(*parts: str) -> str:
    return hashlib.sha256("\x00".join((*parts, uuid.uuid4().hex)).encode()).hexdigest()[:ID_DIGITS]


def _entry(row: Sequence[Any]) -> LedgerEntry:
    entry_id, type_, role, text, timestamp, ref, data, pos = row
    return LedgerEntry(id=entry_id, type=type_, role=role, text=text, timestamp=timestamp, ref=ref,
                       data=json.loads(data), position=pos)  # fmt: skip


_ENTRY_COLUMNS = "entry_id, type, role, text, timestamp, ref, data, pos"
_INSERT_COLUMNS = "entry_id, type, role, text, timestamp, ref, data"


def _ids(values: Iterable[str], label: str) -> list[str]:
    if isinstance(values, str):
        raise MemoryValidationError(f"{label} must be a list of ids, not one string")
    out = [_text(v, label, cap=MAX_ID_CHARS) for v in values]
    return list(dict.fromkeys(out))


def _check_message(message: Mapping[str, Any], now: str) -> tuple[str, str, str, str]:
    unknown = set(message) - {"role", "text", "entry_id", "timestamp"}
    if unknown:
        raise MemoryValidationError(f"unknown message field(s): {', '.join(sorted(unknown))}")
    role = message.get("role")
    if role not in ROLES:
        raise MemoryValidationError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    entry_id = _text(message.get("entry_id"), "entry_id", cap=MAX_ID_CHARS)
    text = _text(message.get("text"), "message text")
    stamp = message.get("timestamp")
    return entry_id, str(role), text, canonical_time(stamp, "timestamp") if stamp is not None else now
