"""Checking what a caller hands the fabric: times, ids, names, links, and the fields of a ``remember``.

Every check raises MemoryValidationError (or MemoryLimitError for size) naming the field and what it
accepts, so a door can pass the message on to a person as it is.

The caps on a note's fields are set here once, and every path into the store is held to them: each
door's write and ``remember`` (through :func:`validate_fields`), a fold that unions a note's lists,
and an import, whose notes are checked whole (:func:`check_stored_note`). Content and context are
capped by the memory's ``max_entry_text_chars``; the lists by :data:`MAX_LIST_ITEMS` (tags, keywords),
:data:`MAX_LINKS` and :data:`MAX_SOURCE_IDS`, each item by :data:`MAX_ITEM_CHARS`.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .errors import MemoryLimitError, MemoryValidationError
from .types import MemoryNote, NoteLink

if TYPE_CHECKING:
    from .memory import Memory, MemoryLimits

__all__ = [
    "ID_DIGITS",
    "ISO_8601",
    "MAX_ITEM_CHARS",
    "MAX_LINKS",
    "MAX_LIST_ITEMS",
    "MAX_NAME_CHARS",
    "MAX_SOURCE_IDS",
    "NOTE_ID",
    "canonical_time",
    "check_hex",
    "check_name",
    "check_stored_note",
    "validate_fields",
]

MAX_NAME_CHARS = 200  # a note's name
MAX_LIST_ITEMS = 256  # tags or keywords of one note
MAX_LINKS = 4096  # links of one note (an entity of a knowledge graph may have thousands of relations)
MAX_SOURCE_IDS = 1024  # source_entry_ids of one note
MAX_ITEM_CHARS = 200  # one tag, keyword, link relation or source entry id


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


# a new id is 20 hex digits (80 random bits: stores that sync never meet two versions under one id);
# ids made before are 12 and stay valid
ID_DIGITS = 20
NOTE_ID = re.compile(r"^[0-9a-f]{12}(?:[0-9a-f]{8})?$")


def check_hex(value: Any, label: str) -> str:
    """Given a note id, return it; raise MemoryValidationError unless it is 20 lowercase hex (or 12,
    as ids made before were)."""
    if not isinstance(value, str) or not NOTE_ID.match(value):
        raise MemoryValidationError(f"{label} must be {ID_DIGITS} lowercase hex characters (or 12), got {value!r}")
    return value


def check_name(value: Any) -> str:
    """Given a note name, return it; raise MemoryValidationError unless it is 1..200 characters
    without '/', NUL or a leading '.'."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_NAME_CHARS:
        raise MemoryValidationError(f"name must be a string of 1..{MAX_NAME_CHARS} characters")
    if "/" in value or "\x00" in value or value.startswith("."):
        raise MemoryValidationError(f"name {value!r} may not contain '/' or NUL, nor start with '.'")
    return value


def _count(value: list[Any] | tuple[Any, ...], label: str, cap: int) -> None:
    if len(value) > cap:
        raise MemoryLimitError(f"{label} has {len(value)} items; the cap is {cap}")


def _chars(value: str, label: str, cap: int, what: str) -> None:
    if len(value) > cap:
        raise MemoryLimitError(f"{label} has {len(value)} characters; the cap is {cap}{what}")


def _strings(value: Any, label: str) -> list[str]:
    if not isinstance(value, list | tuple) or any(not isinstance(v, str) or not v or "\x00" in v for v in value):
        raise MemoryValidationError(f"{label} must be a list of non-empty strings without NUL characters")
    _count(value, label, MAX_SOURCE_IDS if label == "source_entry_ids" else MAX_LIST_ITEMS)
    for item in value:
        _chars(item, f"an item of {label}", MAX_ITEM_CHARS, "")
    return list(dict.fromkeys(value))


def _weight(weight: Any) -> bool:
    """Whether a link weight is absent or a finite number in [0, 1]."""
    return weight is None or (
        not isinstance(weight, bool) and isinstance(weight, int | float) and math.isfinite(weight) and 0 <= weight <= 1
    )


def _links(value: Any) -> list[NoteLink]:
    if not isinstance(value, list | tuple):
        raise MemoryValidationError("links must be a list of {id, relation?, weight?}")
    _count(value, "links", MAX_LINKS)
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
        _chars(relation, "a link relation", MAX_ITEM_CHARS, "")
        if not _weight(weight):
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
    if "context" in f:
        _chars(f["context"], "context", memory.limits.max_entry_text_chars, " (max_entry_text_chars)")
    if "links" in f:
        f["links"] = _links(f["links"])
    if "supersedes" in f:
        check_hex(f["supersedes"], "supersedes")
    if "importance" in f:
        imp = f["importance"]
        if isinstance(imp, bool) or not isinstance(imp, int | float) or not math.isfinite(imp) or not 0 <= imp <= 1:
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
        _chars(content, "content", memory.limits.max_entry_text_chars, " (max_entry_text_chars)")
    elif kind in ("fact", "procedure", "working") and "reflection_id" not in f:
        raise MemoryValidationError(f'content is required for kind "{kind}"')
    return f


def check_stored_note(note: MemoryNote, limits: MemoryLimits) -> None:
    """Given a whole note as it would be stored (read from a bundle, or a fold's union), refuse it unless it
    keeps the caps every write keeps, and its values are ones the store writes.

    Raises:
        MemoryLimitError: a field over its cap, named.
        MemoryValidationError: importance or a link weight not a finite number in [0,1], a note that
            supersedes itself.
    """
    cap, what = limits.max_entry_text_chars, " (max_entry_text_chars)"
    _chars(note.content, "content", cap, what)
    if note.context is not None:
        _chars(note.context, "context", cap, what)
    for label in ("tags", "keywords", "source_entry_ids"):
        items = getattr(note, label)
        _count(items, label, MAX_SOURCE_IDS if label == "source_entry_ids" else MAX_LIST_ITEMS)
        for item in items:
            _chars(item, f"an item of {label}", MAX_ITEM_CHARS, "")
    _count(note.links, "links", MAX_LINKS)
    for link in note.links:
        check_hex(link.id, "link id")
        _chars(link.relation, "a link relation", MAX_ITEM_CHARS, "")
        if not _weight(link.weight):
            raise MemoryValidationError(f"link weight must be a number in [0,1], not {link.weight!r}")
    imp = note.importance
    if imp is not None and (not math.isfinite(imp) or not 0 <= imp <= 1):
        raise MemoryValidationError(f"importance must be a number in [0,1], not {imp!r}")
    if note.supersedes is not None:
        check_hex(note.supersedes, "supersedes")
        if note.supersedes == note.id:
            raise MemoryValidationError("supersedes is the note's own id: a note cannot supersede itself")


def _check_block(block: Any) -> str:
    if not isinstance(block, str) or not _BLOCK.match(block):
        raise MemoryValidationError(f"block must match [a-z0-9][a-z0-9._-]{{0,63}}, got {block!r}")
    return block


_BLOCK = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
