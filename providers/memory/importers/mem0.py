"""A mem0 memories export: JSON, a list of memories or ``{"results": [...]}`` (what ``get_all`` returns).

Each memory ``{id, memory, hash, metadata, categories, created_at, updated_at, user_id, agent_id,
run_id, app_id, …}`` becomes a fact note named ``mem0-<id>`` (so importing a later export of the
same memories makes new versions of the same notes), its ``memory`` the content, its
``categories`` tags, ``created_at`` its ``valid_from``, the ids that say whose it is
(``user_id=…``, ``agent_id=…``, ``run_id=…``, ``app_id=…``) keywords, and its ``metadata`` (a
mapping) kept in ``context`` as one line of JSON.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..fabric.errors import MemoryValidationError
from ..fabric.fields import canonical_time
from .names import NameBook
from .plan import ImportPlan, NoteItem, ReadLimits, bad_input, read_text

__all__ = ["mem0_records", "read_mem0"]

_OWNERS = ("user_id", "agent_id", "run_id", "app_id")


def mem0_records(value: Any) -> list[Any] | None:
    """Given parsed JSON, return its list of memories when it has the shape of a mem0 export, else None."""
    if isinstance(value, dict) and isinstance(value.get("results"), list):
        value = value["results"]
    if isinstance(value, list) and value and all(isinstance(v, dict) and "memory" in v for v in value):
        return value
    return None


def read_mem0(path: Path, limits: ReadLimits) -> ImportPlan:
    """Given a mem0 export file, return its plan (see the module docstring).

    Raises:
        InvalidPath: ``<file>: not JSON`` / ``<file> record N: …`` for a record without text, with a
            bad timestamp, or of the wrong shape.
    """
    del limits
    text = read_text(path, path.name)
    try:
        value = json.loads(text)
    except RecursionError:
        raise bad_input(path.name, "not JSON this command reads (nested too deeply)") from None
    except ValueError as err:
        raise bad_input(path.name, f"not JSON ({err})") from None
    if isinstance(value, dict) and isinstance(value.get("results"), list):
        value = value["results"]
    if not isinstance(value, list):
        raise bad_input(path.name, 'a mem0 export is a JSON list of memories, or {"results": [...]}')
    plan = ImportPlan(label="a mem0 export")
    names = NameBook()
    for number, record in enumerate(value, start=1):
        plan.notes.append(_note(record, f"{path.name} record {number}", names))
    return plan


def _note(record: Any, where: str, names: NameBook) -> NoteItem:
    if not isinstance(record, dict):
        raise bad_input(where, "each memory is a JSON object")
    content = record.get("memory")
    if not isinstance(content, str) or not content.strip():
        raise bad_input(where, "'memory' must be a non-empty string")
    ident = record.get("id")
    if ident is None:
        ident = record.get("hash") or hashlib.sha256(content.encode()).hexdigest()[:16]
    if not isinstance(ident, str | int) or not str(ident).strip():
        raise bad_input(where, "'id' must be a string")
    categories = record.get("categories") or []
    if not isinstance(categories, list) or any(not isinstance(c, str) for c in categories):
        raise bad_input(where, "'categories' must be a list of strings")
    metadata = record.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise bad_input(where, "'metadata' must be a JSON object")
    keywords = [f"{key}={record[key]}" for key in _OWNERS if isinstance(record.get(key), str | int) and record[key]]
    return NoteItem(
        key=str(ident), where=where, kind="fact", name=names.claim("fact", f"mem0-{ident}"), content=content,
        tags=[c.strip() for c in categories if c.strip()], keywords=keywords,
        context=json.dumps(metadata, ensure_ascii=False, sort_keys=True, default=str) if metadata else None,
        valid_from=_moment(record.get("created_at"), where),
    )  # fmt: skip


def _moment(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    try:
        return canonical_time(value, "created_at")
    except MemoryValidationError:
        raise bad_input(where, f"created_at is not an ISO 8601 timestamp: {value!r}") from None
