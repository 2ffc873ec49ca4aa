"""Notes as Markdown: YAML front matter (every field), then the content.

``render_note`` is what ``cat`` shows and what exact/regex search greps; ``parse_note`` reads a
written note back into the fields ``remember`` accepts. Read-only fields in the front matter (id,
kind, timestamps, ...) are accepted and ignored so that ``cat`` → edit → write round-trips; an
unknown field is refused.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .errors import MemoryValidationError
from .front_matter import load_front_matter, yaml_problem
from .types import MemoryNote
from .yaml_lines import field_lines

__all__ = [
    "READ_ONLY_FIELDS",
    "WRITABLE_FIELDS",
    "dump_field",
    "parse_note",
    "render_field",
    "render_front",
    "render_note",
]

# Front matter order: identity first, then validity, then annotations. ``superseded_by`` is no column:
# /history shows it under ``status`` when a successor retired the version (..tree.versions).
_ORDER = (
    "id",
    "kind",
    "name",
    "block",
    "path",
    "status",
    "superseded_by",
    "valid_from",
    "valid_to",
    "t_ref",
    "supersedes",
    "tags",
    "keywords",
    "context",
    "importance",
    "links",
    "source_entry_ids",
    "promoted_from",
    "consent",
    "token_count",
    "created_at",
    "ingested_at",
    "updated_at",
    "forgotten_at",
)

WRITABLE_FIELDS = frozenset(
    {
        "valid_from",
        "valid_to",
        "t_ref",
        "supersedes",
        "tags",
        "keywords",
        "context",
        "importance",
        "links",
        "source_entry_ids",
        "consent",
    }
)
READ_ONLY_FIELDS = frozenset(set(_ORDER) - WRITABLE_FIELDS)


class _Dumper(yaml.SafeDumper):
    pass


# libyaml's emitter writes the same bytes as PyYAML's pure-Python one four times faster for printable
# ASCII on one line; anything else (a newline ends a document with "..." there) takes the Python one
_CDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", _Dumper)
if _CDumper is not _Dumper:
    _CDumper = type("_CDumper", (_CDumper,), {})


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)
_CDumper.add_representer(str, _str_representer)
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")


def _one_line_ascii(value: Any) -> bool:
    if isinstance(value, str):
        return _PRINTABLE_ASCII.fullmatch(value) is not None
    if isinstance(value, dict):
        return all(_one_line_ascii(k) and _one_line_ascii(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_one_line_ascii(v) for v in value)
    return True


def _dumper_for(front: dict[str, Any]) -> type[yaml.SafeDumper]:
    return _CDumper if _one_line_ascii(front) else _Dumper


def render_front(note: MemoryNote) -> str:
    """Given a note, return the head of its Markdown: ``---``, the front matter, ``---``, each on its line."""
    data = note.model_dump(mode="json", exclude_none=True, exclude={"scope"})
    lines = ["---\n"]
    for key in _ORDER:
        value = data.get(key)
        if value is None or (not value and type(value) in (list, dict)):
            continue
        # each top-level field's lines are the same whether dumped alone or with the others
        lines.append(field_lines(key, value) or _dump({key: value}))
    lines.append("---\n")
    return "".join(lines)


def _dump(front: dict[str, Any]) -> str:
    return yaml.dump(front, Dumper=_dumper_for(front), sort_keys=False, allow_unicode=True, width=1_000_000)


def render_field(key: str, value: str) -> str:
    """Given a field and a one-line value, return its line of the front matter as :func:`render_front`
    writes it (a top-level field of text is one line of its own)."""
    # without the emitter where it can (about 50 times faster than a dump, which a listing of /history
    # would make for every version)
    return field_lines(key, value) or dump_field(key, value)


def dump_field(key: str, value: str) -> str:
    """:func:`render_field` through the YAML emitter, whatever the value."""
    return _dump({key: value})


def render_note(note: MemoryNote) -> str:
    """Given a note, return its Markdown: ``---`` front matter ``---`` then the content and a newline
    (a PostgreSQL store keeps the front matter and puts the two together the same way in SQL:
    ``afi.storage.pg_derived_notes``)."""
    body = note.content if note.content.endswith("\n") else note.content + "\n"
    return render_front(note) + body


def parse_note(text: str) -> tuple[dict[str, Any], str]:
    """Given written Markdown, return (writable front-matter fields, content).

    Text without front matter is all content. Raises MemoryValidationError for malformed YAML,
    a front matter that is not a mapping, nested too deeply, or with an unknown field, and
    MemoryLimitError for one over its cap (:mod:`.front_matter`).
    """
    if not text.startswith("---\n") and text.strip() != "---":
        return {}, _strip_final_newline(text)
    end = text.find("\n---\n", 3)
    closing = 5
    if end == -1:
        if text.endswith("\n---"):
            end, closing = len(text) - 4, 4
        else:
            raise MemoryValidationError("the front matter starts with '---' but has no closing '---' line")
    raw = text[4 : end + 1]
    body = text[end + closing :]
    try:
        loaded = load_front_matter(raw) if raw.strip() else {}
    except yaml.YAMLError as err:
        line, problem = yaml_problem(err, raw)
        where = f" (line {line})" if line is not None else ""
        raise MemoryValidationError(f"the front matter is not valid YAML{where}: {problem}") from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise MemoryValidationError("the front matter must be a YAML mapping of field: value")
    unknown = sorted(str(k) for k in loaded if k not in WRITABLE_FIELDS and k not in READ_ONLY_FIELDS)
    if unknown:
        allowed = ", ".join(sorted(WRITABLE_FIELDS))
        raise MemoryValidationError(f"unknown front-matter field(s): {', '.join(unknown)} (writable: {allowed})")
    fields = {k: _plain(v) for k, v in loaded.items() if k in WRITABLE_FIELDS}
    return fields, _strip_final_newline(body)


def _plain(value: Any) -> Any:
    """YAML turns unquoted timestamps into datetimes; the fabric takes ISO strings."""
    if hasattr(value, "isoformat"):
        return value.isoformat().replace("+00:00", "Z")
    return value


def _strip_final_newline(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text
