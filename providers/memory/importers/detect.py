"""Which format a foreign source is in, by a rule a person can predict.

A folder:
  1. with a ``.obsidian/`` folder inside → ``obsidian``;
  2. else named ``memories`` → ``claude-memories``;
  3. else holding a ``.md`` file (at any depth, outside hidden folders) → ``markdown``;
  4. else holding any other file → ``claude-memories`` (its files are kept as files).
A file:
  - ``.md``/``.markdown`` → ``markdown`` (one note);
  - else JSON whose first non-blank line is an ``{"type": "entity"|"relation", …}`` object →
    ``mcp-memory``;
  - else a JSON list of objects with a ``memory`` field, or ``{"results": [...]}`` of them → ``mem0``.
Anything else is refused, naming the formats known.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from afi.errors import InvalidPath

from .mcp_memory import graph_record
from .mem0 import mem0_records

__all__ = ["FORMATS", "detect", "unknown_format"]

FORMATS: tuple[str, ...] = ("markdown", "obsidian", "mcp-memory", "mem0", "claude-memories")
_SNIFF_BYTES = 64 << 20  # a mem0 export is parsed whole to be recognised; larger files need --format


def unknown_format(path: Path, why: str) -> InvalidPath:
    """The error for a source no reader takes: what it is not, and the formats there are."""
    return InvalidPath(f"{path.name}: {why}; afi import reads an afi bundle or one of: {', '.join(FORMATS)} "
                       "(name one with --format)")  # fmt: skip


def detect(path: Path) -> str:
    """Given a file or folder, return its format (see the module docstring).

    Raises:
        InvalidPath: no such file or folder, or a source in none of the known formats.
    """
    if path.is_dir():
        return _folder(path)
    if not path.is_file():
        raise InvalidPath(f"{path}: no such file or folder")
    if path.suffix.lower() in (".md", ".markdown"):
        return "markdown"
    try:
        with path.open("rb") as handle:
            head = handle.read(_SNIFF_BYTES + 1)
    except OSError as err:
        raise InvalidPath(f"{path.name}: cannot be read: {err.strerror}") from None
    text = head.decode("utf-8-sig", errors="replace")
    first = next((line for line in text.splitlines() if line.strip()), "")
    if graph_record(first) is not None:
        return "mcp-memory"
    if len(head) <= _SNIFF_BYTES:
        try:
            if mem0_records(json.loads(text)) is not None:
                return "mem0"
        except RecursionError:  # too deep for any format here: say so, naming the file
            raise unknown_format(path, "JSON nested too deeply to read") from None
        except ValueError:
            pass
    raise unknown_format(path, "not a format this command recognises")


def _folder(path: Path) -> str:
    if (path / ".obsidian").is_dir():
        return "obsidian"
    if path.name.lower() == "memories":
        return "claude-memories"
    any_file = False
    for _folder_name, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        visible = [name for name in files if not name.startswith(".")]
        if any(name.lower().endswith((".md", ".markdown")) for name in visible):
            return "markdown"
        any_file = any_file or bool(visible)
    if any_file:
        return "claude-memories"
    raise unknown_format(path, "an empty folder")
