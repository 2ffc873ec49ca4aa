"""One space's contents as a bundle carries them: what export reads from a store and import writes to one.

Nothing here is derived: no rendering, no vector, no full-text index, no store-wide counter (a note's
``seq``, a ledger entry's ``seq``, a session's ``key``), which a store makes again for itself. Order
is kept where it means something: notes by ``order`` (the rank of their ``seq``: the latest version
of a name is the last written), ledger entries by position.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fabric.types import MemoryNote

__all__ = ["FileEntry", "FileVersion", "LedgerSessionData", "SpaceData", "SpaceFiles"]


@dataclass(frozen=True)
class LedgerSessionData:
    """A session: its id, when it was created, and its entries in branch order (each a dict of the
    row's columns: pos, mpos, entry_id, type, role, text, timestamp, ref, data)."""

    session_id: str
    created_at: str
    entries: list[dict[str, Any]]


@dataclass(frozen=True)
class FileEntry:
    """A file or folder of the workspace; ``source`` is where its bytes are read from (a file of the
    workspace or the bundle, or a kept version's blob); a folder has no size, digest or source."""

    path: str
    kind: str  # "file" or "folder"
    mtime_ns: int
    size: int = 0
    sha256: str | None = None
    source: Path | Callable[[], bytes] | None = None


@dataclass(frozen=True)
class FileVersion:
    """A kept version of a workspace file: ``sha256`` None when the file was absent (deleted, moved away)."""

    order: int
    path: str
    sha256: str | None
    size: int
    at: str
    op: str


@dataclass
class SpaceFiles:
    entries: list[FileEntry] = field(default_factory=list)
    versions: list[FileVersion] = field(default_factory=list)
    blobs: dict[str, Callable[[], bytes]] = field(default_factory=dict)  # sha256 -> its bytes, when asked


@dataclass
class SpaceData:
    """Everything of one space a bundle keeps."""

    name: str
    notes: list[MemoryNote] = field(default_factory=list)  # in order: oldest seq first
    working_version: int = 0  # 0: the space never had a working value
    working_value: dict[str, Any] = field(default_factory=dict)  # blocks included
    lineage: list[tuple[str, str, str]] = field(default_factory=list)  # (entry_id, status, changed_at)
    sessions: list[LedgerSessionData] = field(default_factory=list)
    snapshots: list[tuple[str, str, str]] = field(default_factory=list)  # (name, at, created_at)
    files: SpaceFiles = field(default_factory=SpaceFiles)
    horizon: str | None = None  # the gc horizon: before it, the space's past is not exact (see horizon.py)

    def counts(self) -> dict[str, int]:
        """What the manifest says the space holds."""
        entries = [e for s in self.sessions for e in s.entries]
        return {
            "notes": len(self.notes),
            "working_blocks": len(_blocks(self.working_value)),
            "lineage": len(self.lineage),
            "sessions": len(self.sessions),
            "ledger_entries": len(entries),
            "observations": sum(1 for e in entries if e["type"] == "observation"),
            "reflections": sum(1 for e in entries if e["type"] == "reflection"),
            "snapshots": len(self.snapshots),
            "files": sum(1 for f in self.files.entries if f.kind == "file"),
            "folders": sum(1 for f in self.files.entries if f.kind == "folder"),
            "file_versions": len(self.files.versions),
        }


def _blocks(value: dict[str, Any]) -> dict[str, Any]:
    fabric = value.get("_fabric")
    blocks = fabric.get("blocks") if isinstance(fabric, dict) else None
    return blocks if isinstance(blocks, dict) else {}
