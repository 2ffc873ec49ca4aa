"""Settling the names and file paths a batch touched: one current version each, the same on every store.

Two current versions of one name (each side wrote a new version of it since they last synced) are a
conflict, and both stores resolve it alike: the version written last (``created_at``, then id) stays
current, the other is retired at that instant (it stays in ``/history``), and the winner links to it
(``won_over``), which its front matter shows. A file's notes are one file's versions whatever their
names, so a file path is settled the same way.

Most names a batch touches have one current version: one query a kind (or for the paths) reads the
windows of every touched name's active versions, and only the names with two current ones are read
whole and settled.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ..fabric.memory import Memory
from ..fabric.rows import NAMED, _scope_key, file_name
from .states import note_of, state_of

__all__ = ["Conflict", "settle_names", "settle_paths"]

_CHUNK = 500  # names an IN list


@dataclass(frozen=True)
class Conflict:
    """Two current versions of one name met: ``kept`` stays current, ``retired`` went to history."""

    kind: str
    name: str
    kept: str
    retired: str


def settle_names(memory: Memory, names: Iterable[tuple[str, str]]) -> list[Conflict]:
    """Given the (kind, name) pairs a batch touched, settle each that has two current versions."""
    by_kind: dict[str, list[str]] = defaultdict(list)
    for kind, name in sorted(set(names)):
        by_kind[kind].append(name)
    conflicts: list[Conflict] = []
    for kind, group in sorted(by_kind.items()):
        contested = _contested(memory, "kind = ? AND name IS NOT NULL AND name || '.md' IN", [kind],
                               [str(file_name(name)) for name in group], "name")  # fmt: skip
        for name in group:
            if name in contested:
                conflicts += _settle(memory, kind, name, f"kind = ? AND {NAMED}", (kind, file_name(name)))
    return conflicts


def settle_paths(memory: Memory, paths: Iterable[str]) -> list[Conflict]:
    """Given the file paths a batch touched, settle each that has two current file notes (after the names:
    settling a file note's name may have retired one of its path's versions)."""
    ordered = sorted(set(paths))
    contested = _contested(memory, "kind = 'file' AND path IN", [], ordered, "path")
    conflicts: list[Conflict] = []
    for path in ordered:
        if path in contested:
            conflicts += _settle(memory, "file", path, "kind = 'file' AND path = ?", (path,))
    return conflicts


def _contested(memory: Memory, where: str, params: list[str], values: list[str], column: str) -> set[str]:
    """Of ``values`` (of ``column``, each asked for by ``where`` ending in ``IN``), those with two or more
    current active versions, as :func:`_settle` counts them."""
    windows: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    with memory.store.read() as conn:
        for start in range(0, len(values), _CHUNK):
            chunk = values[start : start + _CHUNK]
            rows = conn.execute(
                f"SELECT {column}, created_at, valid_to FROM notes WHERE tenant_id = ? AND resource_id = ? "
                f"AND thread_id = ? AND status = 'active' AND {where} ({', '.join('?' * len(chunk))})",
                (*_scope_key(memory.scope), *params, *chunk),
            ).fetchall()
            for value, created_at, valid_to in rows:
                windows[str(value)].append((str(created_at), valid_to))
    out: set[str] = set()
    for value, versions in windows.items():
        newest = max(created_at for created_at, _ in versions)
        if sum(1 for _, valid_to in versions if valid_to is None or valid_to > newest) > 1:
            out.add(value)
    return out


def _settle(memory: Memory, kind: str, name: str, where: str, params: tuple[str | None, ...]) -> list[Conflict]:
    """Leave one current version of a name (or of a file's path: ``where`` and ``params`` select its
    versions): the one written last stays, the others retire at its instant and the winner links to
    each (every store that holds the same versions settles alike)."""
    store, scope = memory.store, memory.scope
    # ordered by id, SQLite's planner walks the whole scope by its key instead of the name's index
    active = store.select_notes(scope, f"{where} AND status = 'active'", params, order="created_at")
    # a version whose window ends after the newest one was written is current too (a valid_to ahead, as
    # each side's own supersede never leaves it): the rows decide, not each store's clock
    newest = max((n.created_at for n in active), default="")
    current = [n for n in active if n.valid_to is None or n.valid_to > newest]
    if len(current) < 2:
        return []
    winner = max(current, key=lambda n: (n.created_at, n.id))
    links = [link.model_dump(exclude_none=True) for link in winner.links]
    conflicts: list[Conflict] = []
    for loser in sorted((n for n in current if n is not winner), key=lambda n: n.id):
        at = max(winner.created_at, loser.valid_from or "")
        updated = max(loser.updated_at or loser.created_at, winner.created_at)
        store.update_note(scope, loser.model_copy(update={"valid_to": at, "updated_at": updated}))
        if not any(link["id"] == loser.id and link.get("relation") == "won_over" for link in links):
            links.append({"id": loser.id, "relation": "won_over"})
        conflicts.append(Conflict(kind, name, winner.id, loser.id))
    store.update_note(scope, note_of({**state_of(winner), "links": links}, scope, f"version {winner.id}"))
    return conflicts
