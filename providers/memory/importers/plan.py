"""What a reader makes of a foreign source before anything is written: notes, files, and what it left out.

A reader parses the whole source into an :class:`ImportPlan` (raising on the first bad record, so
nothing is written from a broken source); :mod:`.write` then checks every note against the store's
rules and writes them through the provider's verbs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from afi.errors import InvalidPath

__all__ = ["LINKS_TO", "FileItem", "ImportPlan", "NoteItem", "ReadLimits", "bad_input", "read_text"]

LINKS_TO = "links_to"  # the relation of a link written in a note's text ([[wikilink]] or [text](note.md))


@dataclass(frozen=True)
class ReadLimits:
    """The store's caps a reader decides by: note length (characters) and workspace file size (bytes)."""

    max_note_chars: int
    max_file_bytes: int


@dataclass
class NoteItem:
    """One note to remember, keyed by its place in the source; ``links`` are (target key, relation)."""

    key: str
    where: str  # how a message names the record: "notes/a.md", "memory.json line 3", "mem0.json record 2"
    kind: str
    name: str
    content: str
    tags: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    context: str | None = None
    valid_from: str | None = None
    links: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class FileItem:
    """One workspace file to write: ``rel`` is its path under ``/files``."""

    where: str
    rel: str
    data: bytes


@dataclass
class ImportPlan:
    """A parsed source: what to write, what was skipped (with why) and which links found no note."""

    label: str  # "an Obsidian vault", for the report
    notes: list[NoteItem] = field(default_factory=list)
    files: list[FileItem] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)


def bad_input(where: str, message: str) -> InvalidPath:
    """The error for a bad record: ``<where>: <message>``, e.g. ``memory.json line 7: not JSON``."""
    return InvalidPath(f"{where}: {message}")


def read_text(path: Path, where: str) -> str:
    """Given a source file, return its text (UTF-8, a byte-order mark dropped, line ends made ``\\n``).

    Raises:
        InvalidPath: the file cannot be read or is not UTF-8 text.
    """
    try:
        data = path.read_bytes()
    except OSError as err:
        raise bad_input(where, f"cannot be read: {err.strerror}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise bad_input(where, f"not UTF-8 text (byte {err.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")
