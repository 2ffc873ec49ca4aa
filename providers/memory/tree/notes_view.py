"""Read-side queries the tree runs over the fabric's ``notes`` table (listing, stat, grep candidates).

The fabric owns the table; the tree only reads it, scoped to one (tenant, resource, thread), so a
listing of 100k notes is a paged index scan and never loads every note. SQL is written once where the
engines agree; where they differ (a glob, a note's size in bytes, the latest version of each name, the
trigram index grep asks) each engine's is said: a listing's glob, SQLite ``GLOB`` syntax, becomes a
PostgreSQL regex (:func:`.pg_glob.glob_regex`), and grep's literals ``ILIKE`` patterns
(:mod:`afi.storage.pg_trigram`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from afi.storage.database import Database, Dialect
from afi.storage.pg_derived_notes import RENDERED_SQL
from afi.storage.pg_trigram import ilike, like_pattern
from afi.storage.trigram import trigram_query

from ..fabric.clock import scope_now
from ..fabric.types import Scope
from .pg_glob import glob_regex

__all__ = ["NoteRow", "NotesView", "glob_regex", "now_iso"]

# a note's Markdown: stored in SQLite, its front matter and content put together in PostgreSQL
_RENDERED: dict[Dialect, str] = {"sqlite": "rendered", "postgresql": RENDERED_SQL}
_SIZE: dict[Dialect, str] = {"sqlite": "length(CAST(rendered AS BLOB))", "postgresql": f"octet_length({RENDERED_SQL})"}


def _valid_now(table: str = "") -> str:
    """The condition of a version valid at ``:now`` (``table``: the alias prefix, such as ``n.``)."""
    starts = f"({table}valid_from IS NULL OR {table}valid_from <= :now)"
    return f"{starts} AND ({table}valid_to IS NULL OR {table}valid_to > :now)"


def _written(at: str | None, table: str = "") -> str:
    """At a past instant (a ``/.afi/at/<instant>`` view), also: the version was written by then
    (``created_at``: a re-save of the same text moves ``ingested_at`` forward, not the version's
    birth). Not asked of now: a replica whose clock lags another's would hide that one's newest notes."""
    return "" if at is None else f" AND {table}created_at <= :now"


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

    def __init__(self, database: Database, scope: Scope) -> None:
        self._db = database
        self._pg = database.dialect == "postgresql"
        self._columns = f"id, kind, name, path, seq, {_SIZE[database.dialect]}, created_at, updated_at, ingested_at"
        self._rendered = _RENDERED[database.dialect]
        self._scope_id = scope
        self._scope = {"t": scope.tenant_id, "r": scope.resource_id, "h": scope.thread_id}
        self._where = "tenant_id = :t AND resource_id = :r AND thread_id = :h"

    def present(self) -> str:
        """The scope's "now", which the kind folders list at (:mod:`..fabric.clock`)."""
        return scope_now(self._db, self._scope_id)

    def _rows(self, sql: str, args: dict[str, Any]) -> list[Any]:
        """Every row of a read, fetched before the connection is given back."""
        with self._db.read() as conn:
            return conn.execute(sql, args).fetchall()

    def _glob(self, column: str, glob: str | None) -> tuple[str, str | None] | None:
        """The condition of a listing's glob on ``column`` and its parameter ("" and None without a
        glob); None when the glob matches no name (PostgreSQL only: SQLite's GLOB says so itself)."""
        if glob is None:
            return "", None
        if not self._pg:
            return f" AND {column} GLOB :glob", glob
        regex = glob_regex(glob)
        return None if regex is None else (f" AND {column} ~ :glob", regex)

    def list_current(
        self, kind: str, *, after: str | None, glob: str | None, limit: int, at: str | None = None
    ) -> list[NoteRow]:
        """Notes of ``kind`` valid now (or at the instant ``at``), ordered by file name ``<name>.md``,
        after a cursor name."""
        matching = self._glob("name || '.md'", glob)
        if matching is None:
            return []
        # Written out per case (no ``:after IS NULL OR …``) so SQLite reads the file-name index from the cursor on.
        sql = (
            f"SELECT {self._columns} FROM notes WHERE {self._where} AND kind = :kind AND {_VALID_NOW}{_written(at)} "
            "AND name IS NOT NULL"
            + (" AND name || '.md' > :after" if after is not None else "")
            + matching[0]
            + " ORDER BY name || '.md' LIMIT :limit"
        )
        args = {
            **self._scope,
            "kind": kind,
            "now": at or self.present(),
            "after": after,
            "glob": matching[1],
            "limit": limit,
        }
        return [_row(r) for r in self._rows(sql, args)]

    def list_history(self, *, after: str | None, glob: str | None, limit: int, at: str | None = None) -> list[NoteRow]:
        """Every stored version (superseded and expired included; held and forgotten left out), by id;
        with ``at``, those written by then."""
        written = "" if at is None else " AND created_at <= :at"
        if not self._pg:
            sql = (
                f"SELECT {self._columns} FROM notes WHERE {self._where} AND status = 'active'{written} "
                "AND (:after IS NULL OR id || '.md' > :after) AND (:glob IS NULL OR id || '.md' GLOB :glob) "
                "ORDER BY id || '.md' LIMIT :limit"
            )
            args = {**self._scope, "after": after, "glob": glob, "limit": limit, "at": at}
            return [_row(r) for r in self._rows(sql, args)]
        matching = self._glob("id || '.md'", glob)
        if matching is None:
            return []
        sql = (
            f"SELECT {self._columns} FROM notes WHERE {self._where} AND status = 'active'{written}"
            + (" AND id || '.md' > :after" if after is not None else "")
            + matching[0]
            + " ORDER BY id || '.md' LIMIT :limit"
        )
        args = {**self._scope, "after": after, "glob": matching[1], "limit": limit, "at": at}
        return [_row(r) for r in self._rows(sql, args)]

    def current(self, kind: str, name: str, at: str | None = None) -> tuple[NoteRow, str] | None:
        """The note of ``kind`` named ``name`` valid now (or at ``at``), with its rendering."""
        sql = (
            f"SELECT {self._columns}, {self._rendered} FROM notes WHERE {self._where} AND kind = :kind "
            f"AND name IS NOT NULL AND name || '.md' = :file AND {_VALID_NOW}{_written(at)} ORDER BY seq DESC LIMIT 1"
        )
        found = self._rows(sql, {**self._scope, "kind": kind, "file": name + ".md", "now": at or self.present()})
        return None if not found else (_row(found[0][:-1]), str(found[0][-1]))

    def current_ids(self, names: Sequence[tuple[str, str]], at: str | None = None) -> dict[tuple[str, str], str]:
        """Given (kind, name) pairs, return the id of the version of each valid now, or at ``at``
        (absent when none is)."""
        if not names:
            return {}
        sql, args = self.current_ids_query(list(dict.fromkeys(names)), at)
        return {(str(kind), str(name)): str(id_) for kind, name, id_, _ in self._rows(sql, args)}

    def current_ids_query(self, pairs: Sequence[tuple[str, str]], at: str | None = None) -> tuple[str, dict[str, Any]]:
        """The query :meth:`current_ids` runs for distinct (kind, name) pairs, and its parameters."""
        values = ", ".join(f"(:k{i}, :n{i})" for i in range(len(pairs)))
        wanted = f"WITH wanted(kind, file) AS (VALUES {values}) SELECT "
        # by file name: the index of names both engines have
        named = (
            "n.tenant_id = :t AND n.resource_id = :r AND n.thread_id = :h AND n.kind = w.kind "
            "AND n.name IS NOT NULL AND n.name || '.md' = w.file AND n.status = 'active' "
            f"AND {_valid_now('n.')}{_written(at, 'n.')}"
        )
        if self._pg:
            # the latest valid version of each name, one index probe per name whatever the statistics say
            # (planned as a join on a guess, it scanned every note: 44 ms at 100k notes against 0.6)
            sql = (
                f"{wanted}n.kind, n.name, n.id, n.seq FROM wanted w CROSS JOIN LATERAL "
                f"(SELECT n.kind, n.name, n.id, n.seq FROM notes n WHERE {named} ORDER BY n.seq DESC LIMIT 1) AS n"
            )
        else:
            # One index probe per pair (the CROSS JOIN keeps that order); a bare column beside MAX() comes
            # from the row holding the maximum: the latest valid version.
            sql = (
                f"{wanted}n.kind, n.name, n.id, MAX(n.seq) FROM wanted w CROSS JOIN notes n ON {named} "
                "GROUP BY n.kind, n.name"
            )
        args: dict[str, Any] = {**self._scope, "now": at or self.present()}
        for i, (kind, name) in enumerate(pairs):
            args[f"k{i}"], args[f"n{i}"] = kind, name + ".md"
        return sql, args

    def version(self, note_id: str, at: str | None = None) -> tuple[NoteRow, str] | None:
        """One stored version by id (for /history; with ``at``, only if written by then), with its rendering."""
        written = "" if at is None else " AND created_at <= :at"
        sql = (
            f"SELECT {self._columns}, {self._rendered} FROM notes "
            f"WHERE {self._where} AND status = 'active' AND id = :id{written}"
        )
        found = self._rows(sql, {**self._scope, "id": note_id, "at": at})
        return None if not found else (_row(found[0][:-1]), str(found[0][-1]))

    def count_current(self, kind: str) -> int:
        sql = f"SELECT count(*) FROM notes WHERE {self._where} AND kind = :kind AND {_VALID_NOW}"
        return int(self._rows(sql, {**self._scope, "kind": kind, "now": self.present()})[0][0])

    def grep_candidates(
        self, literals: list[str], at: str | None = None
    ) -> Iterator[tuple[int, str, str, str | None, bool]]:
        """Yield (rowid, id, kind, name, valid_now) of active notes whose rendering may match; with
        ``at``, of those written by then, and whether each was valid then.

        With literals (each of three characters or more) the trigram index drives the query, and the
        rows are those that may hold every literal in any case. In SQLite that is the FTS5 table (a
        CROSS JOIN keeps SQLite from walking the notes and probing the index once per row); in
        PostgreSQL one ``ILIKE`` per literal, which the ``gin_trgm_ops`` index serves. With none, every
        active note of the scope is a candidate. Texts are loaded separately, page by page.
        """
        valid = _valid_now()
        where = f"{self._where} AND status = 'active'{_written(at)}"
        args: dict[str, Any] = {**self._scope, "now": at or self.present()}
        if literals and self._pg:
            likes = "".join(f" AND {ilike(self._rendered, f':l{i}')}" for i in range(len(literals)))
            sql = f"SELECT rowid, id, kind, name, {valid} FROM notes WHERE {where}{likes}"
            args.update({f"l{i}": like_pattern(literal) for i, literal in enumerate(literals)})
        elif literals:
            sql = (
                f"SELECT n.rowid, n.id, n.kind, n.name, {valid} FROM notes_trigram t "
                "CROSS JOIN notes n ON n.rowid = t.rowid "
                f"WHERE notes_trigram MATCH :expr AND {where}"
            )
            args["expr"] = trigram_query(literals)
        else:
            sql = f"SELECT rowid, id, kind, name, {valid} FROM notes WHERE {where}"
        for rowid, id_, kind, name, is_valid in self._rows(sql, args):
            yield int(rowid), str(id_), str(kind), None if name is None else str(name), bool(is_valid)

    def rendered_by_rowid(self, rowids: list[int]) -> dict[int, str]:
        """The renderings of the given rows (rows deleted since are simply absent)."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        # SQLite: + looks the rows up by rowid, not by the scope's index (PostgreSQL has no unary + on text).
        plus = "" if self._pg else "+"
        sql = (
            f"SELECT rowid, {self._rendered} FROM notes WHERE rowid IN ({marks}) "
            f"AND {plus}tenant_id = ? AND {plus}resource_id = ? AND {plus}thread_id = ?"
        )
        scope = (self._scope["t"], self._scope["r"], self._scope["h"])
        with self._db.read() as conn:
            rows = conn.execute(sql, [*rowids, *scope]).fetchall()
        return {int(rowid): str(rendered) for rowid, rendered in rows}

    def change_token(self) -> int:
        """The scope's latest change seq: grows with every note write, so cached candidates can be checked."""
        sql = f"SELECT MAX(seq) FROM note_changes WHERE {self._where}"
        return int(self._rows(sql, self._scope)[0][0] or 0)
