"""Read-side queries the tree runs over the fabric's ``notes`` table (listing, stat, grep candidates).

The fabric owns the table; the tree only reads it, scoped to one (tenant, resource, thread), so a
listing of 100k notes is a paged index scan and never loads every note. SQL is written once where the
engines agree; where they differ (a note's size in bytes, the latest version of each name, the
trigram index grep asks) each engine's is said: grep's literals become ``ILIKE`` patterns
(:mod:`afi.storage.pg_trigram`), and a listing's glob (:class:`afi.glob.Glob`) narrows the rows with
its literal prefix as a range and a pattern every match passes, SQLite's ``GLOB`` or PostgreSQL's
``LIKE``; the tree keeps those the glob matches (:meth:`.base.Listing.fill`). A version read in ``/history`` or at
an instant reads as it is then (:mod:`.versions`): its row comes with what decides that.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from afi.glob import LIKE_ESCAPE, Glob
from afi.storage.database import Database
from afi.storage.pg_trigram import ilike, like_pattern
from afi.storage.trigram import trigram_query

from ..fabric.clock import scope_now
from ..fabric.types import Scope
from .versions import Facts, Shown, facts_sql, shown, widening

__all__ = ["NoteRow", "NotesView", "file_name", "id_name", "now_iso"]


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
    mark: str = ""  # how its reading differs from the stored text (.versions.Shown.mark)

    @property
    def etag(self) -> str:
        return f'"n{self.id}-{self.seq}{"-" + self.mark if self.mark else ""}"'


def file_name(row: NoteRow) -> str:
    """The name a listing of a kind's notes sorts ``row`` by: ``<name>.md``."""
    return f"{row.name}.md"


def id_name(row: NoteRow) -> str:
    """The name a listing of versions sorts ``row`` by: ``<id>.md``."""
    return f"{row.id}.md"


def _shown_row(values: tuple[object, ...], at: str, past: bool) -> tuple[NoteRow, Shown]:
    """A row read with its facts (``…, valid_from, valid_to, successor``) as it reads at ``at``, and how."""
    id_, kind, name, path, seq, size, created, updated, ingested, valid_from, valid_to, successor = values[:12]
    how = shown(Facts(_text(valid_from), _text(valid_to), _text(ingested), _text(updated), _text(successor)), at,
                past=past)  # fmt: skip
    if how.as_stored:
        return _row(values[:9]), how
    row = NoteRow(str(id_), str(kind), _text(name), _text(path), int(seq or 0),  # type: ignore[call-overload]
                  how.size(int(size or 0)),  # type: ignore[call-overload]
                  str(created), how.mtime(str(created), _text(updated), _text(ingested)), how.mark)  # fmt: skip
    return row, how


def _text(value: object) -> str | None:
    return None if value is None else str(value)


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


def _and(condition: str, table: str) -> str:
    """`` AND condition`` with its table prefix filled in ("" for none)."""
    return f" AND {condition.format(t=table)}" if condition else ""


def _read_as(values: tuple[object, ...], at: str, past: bool) -> tuple[NoteRow, str]:
    """A row read with its facts and its rendering (the last column), and its text, as it reads at ``at``."""
    row, how = _shown_row(values[:-1], at, past)
    text = how.text(str(values[-1]))
    return (row if how.as_stored else replace(row, size=len(text.encode()))), text


def rendered_etag(rendered: str) -> str:
    return '"w' + hashlib.sha256(rendered.encode()).hexdigest()[:20] + '"'


def _latest_of_each_sqlite(wanted: str, named: str) -> str:
    # One index probe per pair (the CROSS JOIN keeps that order); a bare column beside MAX() comes
    # from the row holding the maximum: the latest valid version.
    return (
        f"{wanted}n.kind, n.name, n.id, MAX(n.seq) FROM wanted w CROSS JOIN notes n ON {named} GROUP BY n.kind, n.name"
    )


def _latest_of_each_pg(wanted: str, named: str) -> str:
    # the latest valid version of each name, one index probe per name whatever the statistics say
    # (planned as a join on a guess, it scanned every note: 44 ms at 100k notes against 0.6)
    return (
        f"{wanted}n.kind, n.name, n.id, n.seq FROM wanted w CROSS JOIN LATERAL "
        f"(SELECT n.kind, n.name, n.id, n.seq FROM notes n WHERE {named} ORDER BY n.seq DESC LIMIT 1) AS n"
    )


def _literals_sqlite(rendered: str, literals: list[str], valid: str, where: str, extra: str,
                     args: dict[str, Any]) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """The FTS5 trigram table drives: a CROSS JOIN keeps SQLite from probing it once per note."""
    args["expr"] = trigram_query(literals)
    sql = (
        f"SELECT n.rowid, n.id, n.kind, n.name, {valid} FROM notes_trigram t "
        "CROSS JOIN notes n ON n.rowid = t.rowid "
        f"WHERE notes_trigram MATCH :expr AND {where}{_and(extra, 'n.')}"
    )
    return sql, args


def _literals_pg(rendered: str, literals: list[str], valid: str, where: str, extra: str,
                 args: dict[str, Any]) -> tuple[str, dict[str, Any]]:  # fmt: skip
    """One ``ILIKE`` per literal, which the ``gin_trgm_ops`` index serves."""
    likes = "".join(f" AND {ilike(rendered, f':l{i}')}" for i in range(len(literals)))
    args.update({f"l{i}": like_pattern(literal) for i, literal in enumerate(literals)})
    return f"SELECT rowid, id, kind, name, {valid} FROM notes WHERE {where}{likes}{_and(extra, '')}", args


class NotesView:
    """Scoped read queries over ``notes``; ``kind`` folders list notes valid now, history lists every row."""

    def __init__(self, database: Database, scope: Scope) -> None:
        self._db = database
        engine = database.engine
        self._columns = f"id, kind, name, path, seq, {engine.note_rendering_bytes}, created_at, updated_at, ingested_at"
        # a note's Markdown: stored in SQLite, its front matter and content put together in PostgreSQL
        self._rendered = engine.note_rendering
        self._plus = engine.rowid_hint
        self._latest_of_each = engine.choose(sqlite=_latest_of_each_sqlite, postgresql=_latest_of_each_pg)
        self._literals_query = engine.choose(sqlite=_literals_sqlite, postgresql=_literals_pg)
        # a listing's glob, loosened into this engine's case-sensitive pattern: (condition on {column}, pattern)
        self._narrow: tuple[str, Callable[[Glob], str]] = engine.choose(
            sqlite=("{column} GLOB :glob", Glob.sqlite_glob),
            postgresql=(f"{{column}} LIKE :glob ESCAPE '{LIKE_ESCAPE}'", Glob.like),
        )
        self._facts = facts_sql(database.engine)
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

    def _narrowed(self, column: str, glob: Glob | None, args: dict[str, Any]) -> str:
        """The condition on ``column`` that every name ``glob`` matches meets (its parameters added to
        ``args``); "" without a glob."""
        if glob is None:
            return ""
        condition, pattern = self._narrow
        args["glob"] = pattern(glob)
        condition = " AND " + condition.format(column=column)
        if glob.prefix:
            args["glob_from"] = glob.prefix
            condition += f" AND {column} >= :glob_from"
        if glob.prefix_end is not None:
            args["glob_to"] = glob.prefix_end
            condition += f" AND {column} < :glob_to"
        return condition

    def list_current(
        self, kind: str, *, after: str | None, glob: Glob | None, limit: int, at: str | None = None
    ) -> list[NoteRow]:
        """Notes of ``kind`` valid now (or at the instant ``at``), ordered by file name ``<name>.md``,
        after a cursor name; with ``glob``, at least those it matches (:meth:`_narrowed`)."""
        args: dict[str, Any] = {**self._scope, "kind": kind, "now": at or self.present(), "after": after,
                                "limit": limit}  # fmt: skip
        matching = self._narrowed("name || '.md'", glob, args)
        # Written out per case (no ``:after IS NULL OR …``) so SQLite reads the file-name index from the cursor on.
        facts = "" if at is None else f", {self._facts}"  # now, a version valid reads as stored
        sql = (
            f"SELECT {self._columns}{facts} FROM notes WHERE {self._where} AND kind = :kind AND {_VALID_NOW}"
            f"{_written(at)} AND name IS NOT NULL"
            + (" AND name || '.md' > :after" if after is not None else "")
            + matching
            + " ORDER BY name || '.md' LIMIT :limit"
        )
        rows = self._rows(sql, args)
        return [_row(r) for r in rows] if at is None else [_shown_row(r, at, True)[0] for r in rows]

    def list_history(self, *, after: str | None, glob: Glob | None, limit: int, at: str | None = None) -> list[NoteRow]:
        """Every stored version (superseded and expired included; held and forgotten left out), by id,
        each as it reads now (:mod:`.versions`); with ``at``, those written by then, as they read then.
        With ``glob``, at least those it matches (:meth:`_narrowed`)."""
        written = "" if at is None else " AND created_at <= :at"
        columns = f"{self._columns}, {self._facts}"
        args: dict[str, Any] = {**self._scope, "after": after, "limit": limit, "at": at}
        matching = self._narrowed("id || '.md'", glob, args)
        sql = (
            f"SELECT {columns} FROM notes WHERE {self._where} AND status = 'active'{written}"
            + (" AND id || '.md' > :after" if after is not None else "")
            + matching
            + " ORDER BY id || '.md' LIMIT :limit"
        )
        rows = self._rows(sql, args)
        when = at or self.present()
        return [_shown_row(r, when, at is not None)[0] for r in rows]

    def current(self, kind: str, name: str, at: str | None = None) -> tuple[NoteRow, str] | None:
        """The note of ``kind`` named ``name`` valid now, with its rendering; or valid at ``at``, with its
        text as it read then (:mod:`.versions`)."""
        facts = "" if at is None else f", {self._facts}"
        sql = (
            f"SELECT {self._columns}{facts}, {self._rendered} FROM notes WHERE {self._where} AND kind = :kind "
            f"AND name IS NOT NULL AND name || '.md' = :file AND {_VALID_NOW}{_written(at)} ORDER BY seq DESC LIMIT 1"
        )
        found = self._rows(sql, {**self._scope, "kind": kind, "file": name + ".md", "now": at or self.present()})
        if not found:
            return None
        if at is None:
            return _row(found[0][:-1]), str(found[0][-1])
        return _read_as(found[0], at, True)

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
        sql = self._latest_of_each(wanted, named)
        args: dict[str, Any] = {**self._scope, "now": at or self.present()}
        for i, (kind, name) in enumerate(pairs):
            args[f"k{i}"], args[f"n{i}"] = kind, name + ".md"
        return sql, args

    def version(self, note_id: str, at: str | None = None) -> tuple[NoteRow, str] | None:
        """One stored version by id (for /history; with ``at``, only if written by then), with its text
        as it reads now, or then (:mod:`.versions`)."""
        written = "" if at is None else " AND created_at <= :at"
        sql = (
            f"SELECT {self._columns}, {self._facts}, {self._rendered} FROM notes "
            f"WHERE {self._where} AND status = 'active' AND id = :id{written}"
        )
        found = self._rows(sql, {**self._scope, "id": note_id, "at": at})
        if not found:
            return None
        windowed = found[0][9] is not None or found[0][10] is not None  # else it reads as stored at any time
        return _read_as(found[0], at or (self.present() if windowed else ""), at is not None)

    def count_current(self, kind: str) -> int:
        sql = f"SELECT count(*) FROM notes WHERE {self._where} AND kind = :kind AND {_VALID_NOW}"
        return int(self._rows(sql, {**self._scope, "kind": kind, "now": self.present()})[0][0])

    def grep_candidates(
        self, literals: list[str], at: str | None = None, *, versions: bool = False
    ) -> Iterator[tuple[int, str, str, str | None, bool]]:
        """Yield (rowid, id, kind, name, valid_now) of active notes whose rendering may match; with
        ``at``, of those written by then, and whether each was valid then. With ``versions`` (a search
        of ``/history``), also the versions whose text may match only in a line their reading adds
        (``status: superseded``, ``superseded_by: <id>``: :func:`.versions.widening`).

        With literals (each of three characters or more) the trigram index drives the query, and the
        rows are those that may hold every literal in any case. In SQLite that is the FTS5 table (a
        CROSS JOIN keeps SQLite from walking the notes and probing the index once per row); in
        PostgreSQL one ``ILIKE`` per literal, which the ``gin_trgm_ops`` index serves. With none, every
        active note of the scope is a candidate. Texts are loaded separately, page by page.
        """
        args: dict[str, Any] = {**self._scope, "now": at or self.present()}
        found = self._rows(*self._grep_query(literals, at, "", args))
        wider = widening(literals) if versions and literals else None
        if wider is not None:
            rest, ids = wider
            seen = {row[0] for row in found}
            extra = self._grep_query(rest, at, self._retired(ids, args), args)
            found += [row for row in self._rows(*extra) if row[0] not in seen]
        for rowid, id_, kind, name, is_valid in found:
            yield int(rowid), str(id_), str(kind), None if name is None else str(name), bool(is_valid)

    def _retired(self, ids: list[str], args: dict[str, Any]) -> str:
        """The condition (over ``{t}``, the table's prefix) of a version whose reading may add a line
        holding a literal: one with an end or a start (its status), or, given ``ids``, one whose
        successor's id holds one of them (its ``superseded_by``)."""
        if not ids:
            return "({t}valid_to IS NOT NULL OR {t}valid_from > :now)"
        likes = " OR ".join(f"s.id LIKE :id{i}" for i in range(len(ids)))
        args.update({f"id{i}": f"%{piece}%" for i, piece in enumerate(ids)})
        return (
            "{t}valid_to IS NOT NULL AND {t}id IN (SELECT s.supersedes FROM notes s WHERE s.tenant_id = :t "
            f"AND s.resource_id = :r AND s.thread_id = :h AND s.supersedes IS NOT NULL AND ({likes}))"
        )

    def _grep_query(
        self, literals: list[str], at: str | None, extra: str, args: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """The candidates query for ``literals``, narrowed by the condition ``extra`` (over ``{t}``)."""
        valid = _valid_now()
        args = dict(args)
        if literals:
            where = f"{self._where} AND status = 'active'{_written(at)}"
            return self._literals_query(self._rendered, literals, valid, where, extra, args)
        where = f"{self._where} AND status = 'active'{_written(at)}"
        return f"SELECT rowid, id, kind, name, {valid} FROM notes WHERE {where}{_and(extra, '')}", args

    def rendered_by_rowid(self, rowids: list[int]) -> dict[int, str]:
        """The renderings of the given rows (rows deleted since are simply absent)."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        # SQLite: + looks the rows up by rowid, not by the scope's index (afi.storage.engine's rowid_hint)
        plus = self._plus
        sql = (
            f"SELECT rowid, {self._rendered} FROM notes WHERE rowid IN ({marks}) "
            f"AND {plus}tenant_id = ? AND {plus}resource_id = ? AND {plus}thread_id = ?"
        )
        scope = (self._scope["t"], self._scope["r"], self._scope["h"])
        with self._db.read() as conn:
            rows = conn.execute(sql, [*rowids, *scope]).fetchall()
        return {int(rowid): str(rendered) for rowid, rendered in rows}

    def read_by_rowid(self, rowids: list[int], at: str | None) -> dict[int, str]:
        """The texts of the given versions as they read now (``at`` None: in ``/history``) or at the
        instant ``at`` (:mod:`.versions`); rows deleted since are absent."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        plus = self._plus
        sql = (
            f"SELECT {self._columns}, {self._facts}, {self._rendered}, rowid FROM notes WHERE rowid IN ({marks}) "
            f"AND {plus}tenant_id = ? AND {plus}resource_id = ? AND {plus}thread_id = ?"
        )
        scope = (self._scope["t"], self._scope["r"], self._scope["h"])
        with self._db.read() as conn:
            rows = conn.execute(sql, [*rowids, *scope]).fetchall()
        when = at or self.present()
        return {int(row[-1]): _read_as(row[:-1], when, at is not None)[1] for row in rows}

    def change_token(self) -> int:
        """The scope's latest change seq: grows with every note write, so cached candidates can be checked."""
        sql = f"SELECT MAX(seq) FROM note_changes WHERE {self._where}"
        return int(self._rows(sql, self._scope)[0][0] or 0)
