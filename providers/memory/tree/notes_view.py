"""Read-side queries the tree runs over the fabric's ``notes`` table (listing, stat, grep candidates).

The fabric owns the table; the tree only reads it, scoped to one (tenant, resource, thread), so a
listing of 100k notes is a paged index scan and never loads every note.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from afi.sqlite import Connections
from afi.storage.trigram import trigram_query

from ..fabric.types import Scope

__all__ = ["NoteRow", "NotesView", "now_iso"]

_COLUMNS = "id, kind, name, path, seq, length(CAST(rendered AS BLOB)), created_at, updated_at, ingested_at"


def _valid_now(table: str = "") -> str:
    """The condition of a version valid at ``:now`` (``table``: the alias prefix, such as ``n.``)."""
    starts = f"({table}valid_from IS NULL OR {table}valid_from <= :now)"
    return f"{starts} AND ({table}valid_to IS NULL OR {table}valid_to > :now)"


_VALID_NOW = f"status = 'active' AND {_valid_now()}"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class NoteRow:
    """A note as the tree shows it: identity, size of its rendering, times, and an etag."""

    id: str
    kind: str
    name: str | None
    path: str | None
    seq: int
    size: int
    created_at: str
    mtime: str

    @property
    def etag(self) -> str:
        return f'"n{self.id}-{self.seq}"'


def _row(values: tuple[object, ...]) -> NoteRow:
    id_, kind, name, path, seq, size, created, updated, ingested = values
    return NoteRow(
        str(id_),
        str(kind),
        None if name is None else str(name),
        None if path is None else str(path),
        int(seq or 0),  # type: ignore[call-overload]
        int(size or 0),  # type: ignore[call-overload]
        str(created),
        str(updated or ingested or created),
    )


def rendered_etag(rendered: str) -> str:
    return '"w' + hashlib.sha256(rendered.encode()).hexdigest()[:20] + '"'


class NotesView:
    """Scoped read queries over ``notes``; ``kind`` folders list notes valid now, history lists every row."""

    def __init__(self, connections: Connections, scope: Scope) -> None:
        self._db = connections
        self._scope = {"t": scope.tenant_id, "r": scope.resource_id, "h": scope.thread_id}
        self._where = "tenant_id = :t AND resource_id = :r AND thread_id = :h"

    def list_current(self, kind: str, *, after: str | None, glob: str | None, limit: int) -> list[NoteRow]:
        """Notes of ``kind`` valid now, ordered by file name ``<name>.md``, after a cursor name."""
        # Written out per case (no ``:after IS NULL OR …``) so SQLite reads the file-name index from the cursor on.
        sql = (
            f"SELECT {_COLUMNS} FROM notes WHERE {self._where} AND kind = :kind AND {_VALID_NOW} "
            "AND name IS NOT NULL"
            + (" AND name || '.md' > :after" if after is not None else "")
            + (" AND name || '.md' GLOB :glob" if glob is not None else "")
            + " ORDER BY name || '.md' LIMIT :limit"
        )
        args = {**self._scope, "kind": kind, "now": now_iso(), "after": after, "glob": glob, "limit": limit}
        return [_row(r) for r in self._db.get().execute(sql, args)]

    def list_history(self, *, after: str | None, glob: str | None, limit: int) -> list[NoteRow]:
        """Every stored version (superseded and expired included; held and forgotten left out), by id."""
        sql = (
            f"SELECT {_COLUMNS} FROM notes WHERE {self._where} AND status = 'active' "
            "AND (:after IS NULL OR id || '.md' > :after) AND (:glob IS NULL OR id || '.md' GLOB :glob) "
            "ORDER BY id || '.md' LIMIT :limit"
        )
        args = {**self._scope, "after": after, "glob": glob, "limit": limit}
        return [_row(r) for r in self._db.get().execute(sql, args)]

    def current(self, kind: str, name: str) -> tuple[NoteRow, str] | None:
        """The note of ``kind`` named ``name`` valid now, with its rendering."""
        sql = (
            f"SELECT {_COLUMNS}, rendered FROM notes WHERE {self._where} AND kind = :kind AND name = :name "
            f"AND {_VALID_NOW} ORDER BY seq DESC LIMIT 1"
        )
        found = self._db.get().execute(sql, {**self._scope, "kind": kind, "name": name, "now": now_iso()}).fetchone()
        return None if found is None else (_row(found[:-1]), str(found[-1]))

    def current_ids(self, names: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """Given (kind, name) pairs, return the id of the version of each valid now (absent when none is)."""
        if not names:
            return {}
        pairs = list(dict.fromkeys(names))
        values = ", ".join(f"(:k{i}, :n{i})" for i in range(len(pairs)))
        # One index probe per pair (the CROSS JOIN keeps that order); a bare column beside MAX() comes
        # from the row holding the maximum: the latest valid version.
        sql = (
            f"WITH wanted(kind, name) AS (VALUES {values}) "
            "SELECT n.kind, n.name, n.id, MAX(n.seq) FROM wanted w CROSS JOIN notes n "
            "ON n.tenant_id = :t AND n.resource_id = :r AND n.thread_id = :h AND n.kind = w.kind AND n.name = w.name "
            f"WHERE n.status = 'active' AND {_valid_now('n.')} GROUP BY n.kind, n.name"
        )
        args: dict[str, str] = {**self._scope, "now": now_iso()}
        for i, (kind, name) in enumerate(pairs):
            args[f"k{i}"], args[f"n{i}"] = kind, name
        return {(str(kind), str(name)): str(id_) for kind, name, id_, _ in self._db.get().execute(sql, args)}

    def version(self, note_id: str) -> tuple[NoteRow, str] | None:
        """One stored version by id (for /history), with its rendering."""
        sql = f"SELECT {_COLUMNS}, rendered FROM notes WHERE {self._where} AND status = 'active' AND id = :id"
        found = self._db.get().execute(sql, {**self._scope, "id": note_id}).fetchone()
        return None if found is None else (_row(found[:-1]), str(found[-1]))

    def count_current(self, kind: str) -> int:
        sql = f"SELECT count(*) FROM notes WHERE {self._where} AND kind = :kind AND {_VALID_NOW}"
        return int(self._db.get().execute(sql, {**self._scope, "kind": kind, "now": now_iso()}).fetchone()[0])

    def grep_candidates(self, literals: list[str]) -> Iterator[tuple[int, str, str, str | None, bool]]:
        """Yield (rowid, id, kind, name, valid_now) of active notes whose rendering may match.

        With literals (each of three characters or more) the trigram index drives the query (a CROSS
        JOIN keeps SQLite from walking the notes and probing the index once per row); with none,
        every active note of the scope is a candidate. Texts are loaded separately, page by page.
        """
        now = now_iso()
        valid = _valid_now()
        where = f"{self._where} AND status = 'active'"
        if literals:
            expr = trigram_query(literals)
            sql = (
                f"SELECT n.rowid, n.id, n.kind, n.name, {valid} FROM notes_trigram t "
                "CROSS JOIN notes n ON n.rowid = t.rowid "
                f"WHERE notes_trigram MATCH :expr AND {where}"
            )
            args = {**self._scope, "expr": expr, "now": now}
        else:
            sql = f"SELECT rowid, id, kind, name, {valid} FROM notes WHERE {where}"
            args = {**self._scope, "now": now}
        for rowid, id_, kind, name, is_valid in self._db.get().execute(sql, args):
            yield int(rowid), str(id_), str(kind), name, bool(is_valid)

    def rendered_by_rowid(self, rowids: list[int]) -> dict[int, str]:
        """The renderings of the given rows (rows deleted since are simply absent)."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        sql = (
            f"SELECT rowid, rendered FROM notes WHERE rowid IN ({marks}) "
            "AND +tenant_id = ? AND +resource_id = ? AND +thread_id = ?"  # +: look up by rowid, not the scope's index
        )
        scope = (self._scope["t"], self._scope["r"], self._scope["h"])
        rows = self._db.get().execute(sql, [*rowids, *scope])
        return {int(rowid): str(rendered) for rowid, rendered in rows}

    def change_token(self) -> int:
        """The scope's latest change seq: grows with every note write, so cached candidates can be checked."""
        sql = f"SELECT MAX(seq) FROM note_changes WHERE {self._where}"
        return int(self._db.get().execute(sql, self._scope).fetchone()[0] or 0)
