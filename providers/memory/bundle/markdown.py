"""Notes and working blocks as the bundle's Markdown files, and back.

A file is ``---``, a YAML front matter, ``---``, then the content followed by one newline (always one,
so a content that ends in a newline keeps it: the last newline of the file is the format's, not the
note's). A note's front matter holds every column of its row that is not derived, in the row's
order, ``null`` and ``[]`` included, plus ``order``; a block's holds every key of its stored value
but the content, sorted. Reading is strict: a key missing or unknown, or a value of the wrong type,
is an error naming the file and the field.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import ValidationError

from afi.errors import AfiError, InvalidPath

from ..fabric.front_matter import load_front_matter
from ..fabric.render import _dumper_for
from ..fabric.rows import NOTE_COLUMNS, note_state
from ..fabric.types import MemoryNote
from .layout import NOTE_ID

__all__ = ["block_from_markdown", "block_to_markdown", "note_from_markdown", "note_to_markdown"]

_FIELDS = tuple(c for c in NOTE_COLUMNS if c != "content")
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _document(front: dict[str, Any], content: str) -> bytes:
    head = yaml.dump(front, Dumper=_dumper_for(front), sort_keys=False, allow_unicode=True, width=1_000_000)
    return f"---\n{head}---\n{content}\n".encode()


def _split(data: bytes, where: str) -> tuple[dict[str, Any], str]:
    """Given a file's bytes, return its front matter and content; InvalidPath naming ``where`` otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InvalidPath(f"not UTF-8 text (byte {err.start})", path=where) from None
    end = text.find("\n---\n", 3)
    if not text.startswith("---\n") or end == -1 or not text.endswith("\n"):
        raise InvalidPath("broken front matter: expected '---', YAML, '---', then the content and a newline",
                          path=where)  # fmt: skip
    head = text[4 : end + 1]
    try:
        if "*" in head and any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(head, Loader=_Loader)):
            # a bundle never writes one, and aliases nest into a value that explodes when used (a YAML bomb)
            raise InvalidPath("broken front matter: a YAML alias (*name), which a bundle never holds", path=where)
        front = load_front_matter(head)
    except AfiError as err:
        raise type(err)(f"broken front matter: {err.message}", path=where) from None
    except yaml.YAMLError as err:
        raise InvalidPath(f"broken front matter: not valid YAML ({err})".replace("\n", " "), path=where) from None
    if not isinstance(front, dict):
        raise InvalidPath("broken front matter: not a mapping of field: value", path=where)
    return front, text[end + 5 : -1]


def note_to_markdown(note: MemoryNote, order: int) -> bytes:
    """A note version as its bundle file; ``order`` is its place among the space's notes (1 = oldest)."""
    front: dict[str, Any] = {"order": order, **note_state(note)}
    del front["content"]
    return _document(front, note.content)


def note_from_markdown(data: bytes, where: str, file_id: str) -> tuple[int, MemoryNote]:
    """A note file read back: its order and the note. InvalidPath names the file and the field at fault."""
    front, content = _split(data, where)
    missing = [k for k in ("order", *_FIELDS) if k not in front]
    unknown = sorted(str(k) for k in front if k != "order" and k not in _FIELDS)
    if missing or unknown:
        said = (f"missing {', '.join(missing)}" if missing else "") + ("; " if missing and unknown else "")
        raise InvalidPath(f"broken front matter: {said}{'unknown ' + ', '.join(unknown) if unknown else ''}",
                          path=where)  # fmt: skip
    order = front.pop("order")
    if not isinstance(order, int) or isinstance(order, bool) or order < 1:
        raise InvalidPath(f"broken front matter: order must be a positive integer, not {order!r}", path=where)
    if front["id"] != file_id or not NOTE_ID.match(file_id):
        raise InvalidPath(f"the file is named {file_id}.md but holds note {front['id']!r}", path=where)
    try:
        note = MemoryNote(**front, content=content)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise InvalidPath(f"broken front matter: field {field}: {first['msg']}", path=where) from None
    return order, note


def block_to_markdown(raw: dict[str, Any]) -> bytes:
    """A working block (its stored value: content, id, times…) as its bundle file."""
    front = {k: raw[k] for k in sorted(raw) if k != "content"}
    return _document(front, str(raw["content"]))


def block_from_markdown(data: bytes, where: str) -> dict[str, Any]:
    """A block file read back into the stored value it came from."""
    front, content = _split(data, where)
    if "content" in front:
        raise InvalidPath("broken front matter: a block's content is the file's body, not a field", path=where)
    return {**front, "content": content}


def is_plain_block(raw: Any) -> bool:
    """Whether a stored block can be a Markdown file (a mapping with text content and string keys);
    anything else stays, as stored, in ``space.json``."""
    return isinstance(raw, dict) and isinstance(raw.get("content"), str) and all(isinstance(k, str) for k in raw)
