"""The observational ledger: sessions, their ordered branch, observations, reflections and work scopes.

The store's own tables, on either engine (a SQLite file or a PostgreSQL database, as
:func:`afi.storage.open_database` opens them). A session's branch is an append-only sequence of
entries: messages (``role``/``text``) and the ledger's own records, ``observation`` and
``reflection`` (12-hex ids), and ``om.scope.open``/``om.scope.close``/``om.scope.bound``. The host
writes observations and reflections; nothing here calls a model. An append is idempotent by entry id
(the same id with the same content is a no-op, with other content a conflict) and never reorders.
Messages are indexed (FTS5 on SQLite, a ``tsvector`` on PostgreSQL: :mod:`.index`) for :mod:`.conversation`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from afi.storage.database import Connection, open_database, store_location

from ..fabric.errors import MemoryValidationError
from ..fabric.store import iso_now
from .records import (
    _ENTRY_COLUMNS,
    MAX_ID_CHARS,
    ROLES,
    LedgerEntry,
    Observation,
    Reflection,
    WorkScope,
    _entry,
    _text,
)
from .session import LedgerSession

__all__ = [
    "ROLES",
    "Ledger",
    "LedgerEntry",
    "LedgerSession",
    "Observation",
    "Reflection",
    "WorkScope",
    "create_ledger",
]


class Ledger:
    """The ledger of one space in one store; ``session(id)`` gets or creates a session.

    ``db`` is a SQLite file path or a ``postgresql://`` URL; ``self.db`` keeps it (a Path for a file).
    """

    def __init__(self, db: str | Path, *, space: str = "default") -> None:
        self.db: str | Path = store_location(db)
        self.space = _text(space, "space", cap=MAX_ID_CHARS)
        self.database = open_database(self.db)

    def session(self, session_id: str) -> LedgerSession:
        """Given a session id, return that session, creating it when new."""
        sid = _text(session_id, "session id", cap=MAX_ID_CHARS)
        if "/" in sid or "\x00" in sid or sid != sid.strip():
            raise MemoryValidationError(
                "a session id has no '/', NUL, or surrounding spaces (it names /sessions/<id>.md)"
            )
        found = self.find_session(sid)  # most calls name a session that exists: no write, no key spent
        if found is not None:
            return found
        with self.database.transaction() as conn:
            conn.execute(
                "INSERT INTO ledger_sessions(space, session_id, created_at) VALUES (?,?,?) ON CONFLICT DO NOTHING",
                (self.space, sid, iso_now()),
            )
            key = conn.execute(
                "SELECT key FROM ledger_sessions WHERE space = ? AND session_id = ?", (self.space, sid)
            ).fetchone()[0]
        return LedgerSession(self, sid, int(key))

    def find_session(self, session_id: str) -> LedgerSession | None:
        """Given a session id, return the session when it exists (creating nothing), else None."""
        with self.database.read() as conn:
            row = conn.execute(
                "SELECT key FROM ledger_sessions WHERE space = ? AND session_id = ?", (self.space, session_id)
            ).fetchone()
        return None if row is None else LedgerSession(self, session_id, int(row[0]))

    def sessions(self) -> list[str]:
        """Return the space's session ids, sorted."""
        with self.database.read() as conn:
            rows = conn.execute(
                "SELECT session_id FROM ledger_sessions WHERE space = ? ORDER BY session_id", (self.space,)
            ).fetchall()
        return [r[0] for r in rows]

    def observations(self) -> list[Observation]:
        """Return every observation of the space's sessions, sorted by id."""
        with self.database.read() as conn:
            found = [self._observation(conn, row) for row in self._refs(conn, "observation")]
        return sorted(found, key=lambda o: o.id)

    def observation(self, obs_id: str, *, session_key: int | None = None) -> Observation | None:
        """Given a 12-hex id, return that observation (folded ones included), or None."""
        with self.database.read() as conn:
            rows = self._refs(conn, "observation", obs_id, session_key)
            return self._observation(conn, rows[0]) if rows else None

    def reflection(self, refl_id: str, *, session_key: int | None = None) -> Reflection | None:
        """Given a 12-hex id, return that reflection with the work scope it was promoted through."""
        with self.database.read() as conn:
            rows = self._refs(conn, "reflection", refl_id, session_key)
            if not rows:
                return None
            key, sid, entry = rows[0]
            binds = [json.loads(d)["scope_id"] for (d,) in conn.execute(
                "SELECT data FROM ledger_entries WHERE session_key = ? AND type = 'om.scope.bound' AND ref = ? "
                "ORDER BY pos DESC", (key, refl_id),
            ).fetchall()]  # fmt: skip
            closed = {r[0] for r in conn.execute(
                "SELECT ref FROM ledger_entries WHERE session_key = ? AND type = 'om.scope.close'", (key,)
            ).fetchall()}  # fmt: skip
        # a reflection promotes through a closed scope it is bound to; open-scope-only binds do not count
        scope_id = next((s for s in binds if s in closed), binds[0] if binds else None)
        return Reflection(id=refl_id, session_id=sid, content=entry.text, timestamp=entry.timestamp,
                          entry_id=entry.id, observation_ids=list(entry.data.get("observation_ids", [])),
                          scope_id=scope_id, scope_closed=scope_id in closed)  # fmt: skip

    def _refs(self, conn: Connection, type_: str, ref: str | None = None,
              key: int | None = None) -> list[tuple[int, str, LedgerEntry]]:  # fmt: skip
        sql = (f"SELECT e.session_key, s.session_id, {', '.join('e.' + c.strip() for c in _ENTRY_COLUMNS.split(','))} "
               "FROM ledger_entries e JOIN ledger_sessions s ON s.key = e.session_key "
               "WHERE s.space = ? AND e.type = ?")  # fmt: skip
        params: list[Any] = [self.space, type_]
        if ref is not None:
            sql += " AND e.ref = ?"
            params.append(ref)
        if key is not None:
            sql += " AND e.session_key = ?"
            params.append(key)
        rows = conn.execute(sql + " ORDER BY e.seq", params).fetchall()
        return [(row[0], row[1], _entry(row[2:])) for row in rows]

    def _observation(self, conn: Connection, found: tuple[int, str, LedgerEntry]) -> Observation:
        key, sid, entry = found
        ids = self.database.engine.json_texts("data", "observation_ids")  # the ids a reflection folds
        folded = [r[0] for r in conn.execute(
            "SELECT ref FROM ledger_entries WHERE session_key = ? AND type = 'reflection' AND EXISTS "
            f"(SELECT 1 FROM {ids} WHERE value = ?) ORDER BY pos", (key, entry.ref),
        ).fetchall()]  # fmt: skip
        return Observation(id=entry.ref or "", session_id=sid, content=entry.text, timestamp=entry.timestamp,
                           entry_id=entry.id, source_entry_ids=list(entry.data.get("source_entry_ids", [])),
                           folded_into=folded)  # fmt: skip

    def attach(self, session: LedgerSession | str) -> Any:
        """Given a session (or its id), return the fabric's ``observational`` source over it."""
        from .conversation import LedgerSource

        target = self.session(session) if isinstance(session, str) else session
        if target.ledger is not self and (target.ledger.db, target.ledger.space) != (self.db, self.space):
            raise MemoryValidationError("that session belongs to another ledger")
        return LedgerSource(target)


def create_ledger(db: str | Path, *, space: str = "default") -> Ledger:
    """Given the store (a SQLite file or a ``postgresql://`` URL), return the ledger of one space; the
    store's schema is brought up to date first."""
    return Ledger(db, space=space)
