"""What a space holds and what it held at an instant: the ground ``afi space fork|restore|list`` stand on.

A target is ``SPACE`` or ``SPACE@WHEN``, ``WHEN`` an ISO 8601 instant or the name of one of the space's
snapshots; an instant still to come is refused (what it shows would keep changing). The notes of an
instant are the facts and procedures :mod:`.tree.at` shows there: the version of each name valid then
and already written then.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from afi.errors import InvalidPath, NotFound
from afi.storage.database import Database

from .fabric.types import MemoryNote
from .spaces import check_space_name
from .tree.at import AT_AREAS, resolve_instant
from .tree.notes_view import now_iso

if TYPE_CHECKING:
    from .spaces import Space

__all__ = [
    "KINDS",
    "Progress",
    "SpaceContents",
    "Target",
    "contents",
    "missing_space",
    "notes_at",
    "parse_target",
    "past_instant",
    "space_summaries",
]

KINDS: tuple[str, ...] = tuple(k for k in AT_AREAS.values() if k is not None)  # fact, procedure
Progress = Callable[[str, int, int], None]  # (stage, done, total)
_PAGE = 500


@dataclass(frozen=True)
class Target:
    """``SPACE[@WHEN]`` as typed: the space and the instant's segment (None: now)."""

    space: str
    when: str | None

    def __str__(self) -> str:
        return self.space if self.when is None else f"{self.space}@{self.when}"


def parse_target(spec: str) -> Target:
    """Given ``SPACE`` or ``SPACE@WHEN``, return it split; InvalidPath for a bad space name or an empty WHEN."""
    space, at, when = spec.partition("@")
    check_space_name(space)
    if at and not when:
        raise InvalidPath(f"{spec!r}: name an instant after '@' (ISO 8601, or a snapshot's name)")
    return Target(space, when if at else None)


def past_instant(space: Space, when: str | None) -> str:
    """The canonical instant ``when`` names in ``space`` (now when None): NotFound for an unknown
    snapshot, InvalidPath for no instant or one still to come."""
    now = space.fabric.memory.present()
    if when is None or when == "now":
        return now
    found = resolve_instant(when, f"/.afi/at/{when}", space)
    if found > now:
        raise InvalidPath(f"{when!r} is still to come: name a past instant (or a snapshot)")
    return found


def notes_at(space: Space, at: str | None) -> dict[tuple[str, str], MemoryNote]:
    """Every fact and procedure of the tree at ``at`` (the versions ``/.afi/at/<at>/`` shows; None: the
    tree now), by (kind, name); of two versions of a name valid together, the later one, as a read shows."""
    ids: list[str] = []
    for kind in KINDS:
        after: str | None = None
        while True:
            rows = space.notes.list_current(kind, after=after, glob=None, limit=_PAGE, at=at)
            ids += [row.id for row in rows]
            if len(rows) < _PAGE:
                break
            after = f"{rows[-1].name or rows[-1].id}.md"
    memory = space.fabric.memory
    found: dict[tuple[str, str], MemoryNote] = {}
    for start in range(0, len(ids), _PAGE):
        chunk = ids[start : start + _PAGE]
        marks = ", ".join("?" * len(chunk))
        for note in memory.store.select_notes(memory.scope, f"id IN ({marks})", chunk, order="seq"):
            found[(note.kind, note.name or note.id)] = note
    return found


@dataclass(frozen=True)
class SpaceContents:
    """How much a space holds: stored note versions (any kind or status), working blocks, files on disk,
    kept file versions, snapshots and ledger sessions."""

    notes: int
    blocks: int
    files: int
    file_versions: int
    snapshots: int
    sessions: int

    @property
    def empty(self) -> bool:
        return not any(getattr(self, name) for name in self.__dataclass_fields__)

    def said(self) -> str:
        """Say what it holds, such as ``2 note versions, 1 files``."""
        labels = {"notes": "note versions", "blocks": "working blocks", "sessions": "ledger sessions"}
        return ", ".join(f"{n} {labels.get(name, name.replace('_', ' '))}" for name in self.__dataclass_fields__
                         if (n := getattr(self, name))) or "nothing"  # fmt: skip


def contents(database: Database, space: Space) -> SpaceContents:
    """What ``space`` holds now (files: those on disk, whether or not the index has caught up)."""
    memory = space.fabric.memory
    scope = (memory.scope.tenant_id, memory.scope.resource_id, memory.scope.thread_id)
    name = space.workspace.space
    counts = [
        ("SELECT count(*) FROM notes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ?", scope),
        ("SELECT count(*) FROM file_versions WHERE space = ?", (name,)),
        ("SELECT count(*) FROM snapshots WHERE space = ?", (name,)),
        ("SELECT count(*) FROM ledger_sessions WHERE space = ?", (name,)),
    ]
    with database.read() as conn:
        notes, versions, snapshots, sessions = (int(conn.execute(sql, args).fetchone()[0]) for sql, args in counts)
    files = sum(1 for _ in space.workspace.index.walk("")) if space.workspace.jail.root.is_dir() else 0
    return SpaceContents(notes, len(space.fabric.blocks()), files, versions, snapshots, sessions)


def space_summaries(database: Database) -> list[dict[str, Any]]:
    """Every space that holds notes or indexed files, by name: current facts and procedures, note
    versions, files and ledger sessions."""
    now = now_iso()
    valid = "(valid_from IS NULL OR valid_from <= ?) AND (valid_to IS NULL OR valid_to > ?)"
    current = f"CASE WHEN status = 'active' AND kind IN ('fact', 'procedure') AND {valid} THEN 1 ELSE 0 END"
    with database.read() as conn:
        notes = conn.execute(
            f"SELECT resource_id, count(*), SUM({current}) FROM notes WHERE tenant_id = 'afi' AND thread_id = 'main' "
            "GROUP BY resource_id",
            (now, now),
        ).fetchall()
        files = conn.execute("SELECT space, count(*) FROM workspace_files GROUP BY space").fetchall()
        sessions = conn.execute("SELECT space, count(*) FROM ledger_sessions GROUP BY space").fetchall()
    out: dict[str, dict[str, Any]] = {}

    def row(name: str) -> dict[str, Any]:
        return out.setdefault(str(name), {"space": str(name), "notes": 0, "versions": 0, "files": 0, "sessions": 0})

    for name, versions, live in notes:
        row(name).update(versions=int(versions), notes=int(live or 0))
    for name, count in files:
        row(name)["files"] = int(count)
    for name, count in sessions:
        if str(name) in out:  # a space with sessions only shows once it has notes or files
            out[str(name)]["sessions"] = int(count)
    return [out[name] for name in sorted(out)]


def missing_space(target: Target, space: Space, database: Database) -> None:
    """NotFound when the space a fork or restore reads from holds nothing at all."""
    if contents(database, space).empty:
        raise NotFound(f"the space {target.space!r} holds nothing (afi space list shows those that do)")
