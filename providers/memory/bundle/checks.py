"""What a bundle's records must be to go into a store: no more than the store itself would have written.

A bundle is read from a folder anyone can edit, so each record is held to the rules the store's own
verbs keep: times canonical UTC (``/.afi/at`` compares them as text), session ids that name a file
under ``/sessions``, ledger entries of the kinds the ledger writes, snapshot names as ``afi snapshot``
takes them, file versions as the file history records them, blobs named by the SHA-256 of their
bytes. JSON too deeply nested to parse is refused, not a crash. Each refusal names the file.
"""

from __future__ import annotations

import json
import os
import re
import stat
from datetime import datetime
from typing import Any

from afi.errors import AfiError, InvalidPath

from ..fabric.errors import MemoryValidationError
from ..fabric.fields import canonical_time, check_name, check_stored_note
from ..fabric.memory import MemoryLimits
from ..fabric.types import MemoryNote
from ..ledger.records import MAX_ID_CHARS
from ..snapshots import SNAPSHOT_NAME
from ..workspace.history import _check_version
from .layout import SHA256
from .model import FileVersion

__all__ = [
    "ENTRY_TYPES",
    "check_blob_name",
    "check_entry",
    "check_instant",
    "check_mtime",
    "check_note",
    "check_session_id",
    "check_snapshot",
    "check_version",
    "loads",
    "refuse_links",
]

ENTRY_TYPES = frozenset({"message", "observation", "reflection", "om.scope.open", "om.scope.close", "om.scope.bound"})
_NOTE_TIMES = ("ingested_at", "created_at", "updated_at", "t_ref", "valid_from", "valid_to", "forgotten_at")
_MTIME_MAX = (1 << 63) - 1
_WRITTEN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z")


def loads(data: bytes | str, where: str, what: str = "") -> Any:
    """JSON parsed, or InvalidPath naming ``where`` (and ``what``, such as ``line 3: ``)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise InvalidPath(f"{what}JSON nested too deeply to read", path=where) from None
    except (ValueError, UnicodeDecodeError) as err:
        raise InvalidPath(f"{what}not valid JSON ({err})", path=where) from None


def check_instant(value: Any, label: str, where: str) -> str:
    """A time as the store writes it (``YYYY-MM-DDTHH:MM:SS.mmmZ``); InvalidPath otherwise."""
    if isinstance(value, str) and _WRITTEN.fullmatch(value):
        try:
            datetime.fromisoformat(value[:-1])  # written as the store writes: only a date that is one is left
            return value
        except ValueError:
            pass
    try:
        canonical = canonical_time(value, label)
    except MemoryValidationError as err:
        raise InvalidPath(err.message, path=where) from None
    if canonical != value:
        raise InvalidPath(f"{label} must be a UTC instant as the store writes it ({canonical}), not {value!r}",
                          path=where)  # fmt: skip
    return canonical


def check_note(note: MemoryNote, where: str, limits: MemoryLimits) -> None:
    """A note version's times canonical, its name one the store would take, and its fields within the caps
    every write keeps (``limits``: the target store's)."""
    for key in _NOTE_TIMES:
        value = getattr(note, key)
        if value is not None:
            check_instant(value, f"broken front matter: field {key}", where)
    if note.name is not None:
        try:
            check_name(note.name)
        except MemoryValidationError as err:
            raise InvalidPath(f"broken front matter: field name: {err.message}", path=where) from None
    try:
        check_stored_note(note, limits)
    except AfiError as err:
        raise type(err)(err.message, path=where) from None


def check_session_id(sid: Any, where: str) -> str:
    """A session id the ledger would take: 1..200 characters, no '/', NUL or surrounding spaces."""
    if (
        not isinstance(sid, str)
        or not sid
        or len(sid) > MAX_ID_CHARS
        or "/" in sid
        or "\x00" in sid
        or sid != sid.strip()
    ):
        raise InvalidPath(f"line 1: {sid!r} is not a session id (1..{MAX_ID_CHARS} characters, no '/', NUL or "
                          "surrounding spaces)", path=where)  # fmt: skip
    return sid


def check_entry(entry: dict[str, Any], n: int, where: str) -> None:
    """A ledger entry of a kind the ledger writes, stamped as it stamps."""
    if entry["type"] not in ENTRY_TYPES:
        raise InvalidPath(f"line {n}: type {entry['type']!r} is not one of {', '.join(sorted(ENTRY_TYPES))}",
                          path=where)  # fmt: skip
    check_instant(entry["timestamp"], f"line {n}: timestamp", where)


def check_snapshot(name: str, at: str, created_at: str, where: str) -> None:
    if not SNAPSHOT_NAME.match(name):
        raise InvalidPath(f"snapshot name {name!r} is not [a-z][a-z0-9._-]* (up to 64 characters)", path=where)
    check_instant(at, f"snapshot {name}: at", where)
    check_instant(created_at, f"snapshot {name}: created_at", where)


def check_version(version: FileVersion, n: int, where: str) -> None:
    """A file version as the file history records it."""
    try:
        at = _check_version(version.path, version.sha256, version.size, version.at, version.op)
    except InvalidPath as err:
        raise InvalidPath(f"line {n}: {err.message}", path=where) from None
    if at != version.at:
        raise InvalidPath(f"line {n}: at must be a UTC instant as the store writes it ({at})", path=where)


def check_blob_name(rel: str, checksum: str, where: str) -> None:
    """A blob is named by the SHA-256 of its bytes (the manifest's checksum, already checked against them)."""
    name = rel.removeprefix("blobs/")
    if not SHA256.match(name) or "/" in name:
        raise InvalidPath("a blob is named by the 64 hex digits of its SHA-256", path=where)
    if checksum != name:
        raise InvalidPath("this blob's name is not the SHA-256 of its bytes", path=where)


def check_mtime(value: Any) -> int:
    """A modification time in ns that a file can have (ValueError otherwise: the caller names the file)."""
    mtime = int(value)
    if not 0 <= mtime <= _MTIME_MAX:
        raise ValueError(f"mtime_ns out of range: {value!r}")
    return mtime


def refuse_links(folder: str, names: list[str]) -> list[os.stat_result]:
    """Given names in ``folder``, return their stats; InvalidPath for a symbolic link or a file with other
    hard links among them: a bundle holds plain files and folders only, and either would read bytes
    from outside it."""
    found = []
    for name in names:
        full = os.path.join(folder, name)
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            raise InvalidPath("a symbolic link: a bundle holds plain files and folders only (this one would "
                              "read from outside the bundle)", path=full)  # fmt: skip
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            raise InvalidPath(f"a file with {st.st_nlink} hard links: a bundle holds plain files of its own only "
                              "(another link may be a file outside the bundle; copy the bundle with cp -r to "
                              "import it)", path=full)  # fmt: skip
        found.append(st)
    return found
