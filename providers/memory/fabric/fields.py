"""Checking what a caller hands the fabric: times, ids, names, links, and the fields of a ``remember``.

Every check raises MemoryValidationError (or MemoryLimitError for size) naming the field and what it
accepts, so a door can pass the message on to a person as it is.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .errors import MemoryLimitError, MemoryValidationError
from .types import NoteLink

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["ISO_8601", "canonical_time", "check_hex", "check_name", "validate_fields"]


# ISO 8601's shape, checked before Python's parser, which also takes "1" * 5000 (a time in year 1111).
ISO_8601 = re.compile(
    r"\d{4}-?\d{2}-?\d{2}(?:[Tt ]\d{2}(?::?\d{2}(?::?\d{2}(?:[.,]\d{1,9})?)?)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?"
)


def canonical_time(value: Any, label: str) -> str:
    """Given an ISO timestamp string or datetime, return it as UTC ``YYYY-MM-DDTHH:MM:SS.mmmZ``.

    Raises MemoryValidationError for anything that is not a valid timestamp.
    """
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str) and value:
        if not ISO_8601.fullmatch(value):
            shown = value if len(value) <= 40 else value[:40] + "…"
            raise MemoryValidationError(f"{label} must be an ISO 8601 timestamp, got {shown!r}")
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            raise MemoryValidationError(f"{label} must be an ISO 8601 timestamp, got {value!r}") from None
    else:
        raise MemoryValidationError(f"{label} must be an ISO 8601 timestamp")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:  # a time that leaves the years 1-9999 once in UTC
        raise MemoryValidationError(f"{label} is out of range: {value!r}") from None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_HEX12 = re.compile(r"^[0-9a-f]{12}$")


def check_hex(value: Any, label: str) -> str:
    """Given a note id, return it; raise MemoryValidationError unless it is 12 lowercase hex."""
    if not isinstance(value, str) or not _HEX12.match(value):
        raise MemoryValidationError(f"{label} must be 12 lowercase hex characters, got {value!r}")
    return value


def check_name(value: Any) -> str:
    """Given a note name, return it; raise MemoryValidationError unless it is 1..200 characters
    without '/', NUL or a leading '.'."""
    if not isinstance(value, str) or not 1 <= len(value) <= 200:
        raise MemoryValidationError("name must be a string of 1..200 characters")
    if "/" in value or "\x00" in value or value.startswith("."):
        raise MemoryValidationError(f"name {value!r} may not contain '/' or NUL, nor start with '.'")
    return value


def _strings(value: Any, label: str) -> list[str]:
    if not isinstance(value, list | tuple) or any(not isinstance(v, str) or not v or "\x00" in v for v in value):
        raise MemoryValidationError(f"{label} must be a list of non-empty strings without NUL characters")
    return list(dict.fromkeys(value))


def _links(value: Any) -> list[NoteLink]:
    if not isinstance(value, list | tuple):
        raise MemoryValidationError("links must be a list of {id, relation?, weight?}")
    out: list[NoteLink] = []
    for link in value:
        raw = link.model_dump() if isinstance(link, NoteLink) else link
        if not isinstance(raw, dict) or set(raw) - {"id", "relation", "weight"}:
            raise MemoryValidationError("each link must be a mapping of id, relation?, weight?")
        check_hex(raw.get("id"), "link id")
        relation = raw.get("relation") or "related"
        weight = raw.get("weight")
        if not isinstance(relation, str):
            raise MemoryValidationError("link relation must be a string")
        if weight is not None and (
            isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1
        ):
            raise MemoryValidationError("link weight must be a number in [0,1]")
        out.append(NoteLink(id=raw["id"], relation=relation, weight=weight))
    return out


def validate_fields(memory: Memory, kind: str, now: str, **given: Any) -> dict[str, Any]:
    """Given a remember's fields, return them checked and canonical (None values dropped).

    Raises MemoryValidationError naming the field and what it accepts, and MemoryLimitError for
    content over ``max_entry_text_chars``.
    """
    f = {key: value for key, value in given.items() if value is not None}
    if "id" in f:
        if kind == "working":
            raise MemoryValidationError('kind "working" derives its id from the block label; omit id')
        check_hex(f["id"], "id")
    if "block" in f and kind != "working":
        raise MemoryValidationError('"block" is only valid for kind "working"')
    if "path" in f and kind != "file":
        raise MemoryValidationError('"path" is only valid for kind "file"')
    if "name" in f:
        if kind in ("working", "episode"):
            raise MemoryValidationError(f'kind "{kind}" takes no name (a working note is named by its block)')
        check_name(f["name"])
    for key in ("t_ref", "valid_from", "valid_to"):
        if key in f:
            f[key] = canonical_time(f[key], key)
    if "valid_from" in f and "valid_to" in f and f["valid_to"] <= f["valid_from"]:
        raise MemoryValidationError("valid_to must be after valid_from")
    for key in ("keywords", "tags", "source_entry_ids"):
        if key in f:
            f[key] = _strings(f[key], key)
    if "context" in f and (not isinstance(f["context"], str) or not f["context"].strip()):
        raise MemoryValidationError("context must be a non-empty string")
    if "links" in f:
        f["links"] = _links(f["links"])
    if "supersedes" in f:
        check_hex(f["supersedes"], "supersedes")
    if "importance" in f:
        imp = f["importance"]
        if isinstance(imp, bool) or not isinstance(imp, int | float) or not 0 <= imp <= 1:
            raise MemoryValidationError("importance must be a number in [0,1]")
        f["importance"] = float(imp)
    if "reflection_id" in f:
        if kind not in ("fact", "procedure"):
            raise MemoryValidationError('"reflection_id" is only valid for kind "fact" or "procedure"')
        if "content" in f:
            raise MemoryValidationError('"reflection_id" derives the content; omit content')
        check_hex(f["reflection_id"], "reflection_id")
    if kind == "working":
        f["block"] = _check_block(f.get("block"))
    if kind == "file":
        path = f.get("path")
        if not isinstance(path, str) or not path or "\x00" in path:
            raise MemoryValidationError('kind "file" requires a non-empty path without NUL')
        f.setdefault("content", path)
    if "content" in f:
        content = f["content"]
        if not isinstance(content, str) or not content.strip():
            raise MemoryValidationError("content must be a non-empty string")
        cap = memory.limits.max_entry_text_chars
        if len(content) > cap:
            raise MemoryLimitError(f"content has {len(content)} characters; the cap is {cap} (max_entry_text_chars)")
    elif kind in ("fact", "procedure", "working") and "reflection_id" not in f:
        raise MemoryValidationError(f'content is required for kind "{kind}"')
    return f


def _check_block(block: Any) -> str:
    if not isinstance(block, str) or not _BLOCK.match(block):
        raise MemoryValidationError(f"block must match [a-z0-9][a-z0-9._-]{{0,63}}, got {block!r}")
    return block


_BLOCK = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
