"""The observational ledger: sessions, their ordered branch, observations, reflections and work scopes.

One SQLite file (the store's), its own tables. A session's branch is an append-only sequence of
entries: messages (``role``/``text``) and the ledger's own records, ``observation`` and
``reflection`` (12-hex ids), and ``om.scope.open``/``om.scope.close``/``om.scope.bound``. The host
writes observations and reflections; nothing here calls a model. An append is idempotent by entry id
(the same id with the same content is a no-op, with other content a conflict) and never reorders.
Messages are indexed in FTS5 for :mod:`.conversation`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from afi.sqlite import Connections
from afi.storage import ensure_schema

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
    """The ledger of one space in one SQLite file; ``session(id)`` gets or creates a session."""

    def __init__(self, db: str | Path, *, space: str = "default") -> None:
        self.db = Path(db)
        self.space = _text(space, "space", cap=MAX_ID_CHARS)
        self.connections = Connections(self.db)
        ensure_schema(self.connections.get())

    def session(self, session_id: str) -> LedgerSession:
        """Given a session id, return that session, creating it when new."""
        sid = _text(session_id, "session id", cap=MAX_ID_CHARS)
        if "/" in sid or "\x00" in sid or sid != sid.strip():
            raise MemoryValidationError(
                "a session id has no '/', NUL, or surrounding spaces (it names /sessions/<id>.md)"
            )
        with self.connections.transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO ledger_sessions(space, session_id, created_at) VALUES (?,?,?)",
                (self.space, sid, iso_now()),
            )
            key = conn.execute(
                "SELECT key FROM ledger_sessions WHERE space = ? AND session_id = ?", (self.space, sid)
            ).fetchone()[0]
        return LedgerSession(self, sid, int(key))

    def find_session(self, session_id: str) -> LedgerSession | None:
        """Given a session id, return the session when it exists (creating nothing), else None."""
        row = (
            self.connections.get()
            .execute("SELECT key FROM ledger_sessions WHERE space = ? AND session_id = ?", (self.space, session_id))
            .fetchone()
        )
        return None if row is None else LedgerSession(self, session_id, int(row[0]))

    def sessions(self) -> list[str]:
        """Return the space's session ids, sorted."""
        rows = self.connections.get().execute(
            "SELECT session_id FROM ledger_sessions WHERE space = ? ORDER BY session_id", (self.space,)
        )
        return [r[0] for r in rows]

    def observations(self) -> list[Observation]:
        """Return every observation of the space's sessions, sorted by id."""
        return sorted((self._observation(row) for row in self._refs("observation")), key=lambda o: o.id)

    def observation(self, obs_id: str, *, session_key: int | None = None) -> Observation | None:
        """Given a 12-hex id, return that observation (folded ones included), or None."""
        rows = self._refs("observation", obs_id, session_key)
        return self._observation(rows[0]) if rows else None

    def reflection(self, refl_id: str, *, session_key: int | None = None) -> Reflection | None:
        """Given a 12-hex id, return that reflection with the work scope it was promoted through."""
        rows = self._refs("reflection", refl_id, session_key)
        if not rows:
            return None
        key, sid, entry = rows[0]
        conn = self.connections.get()
        binds = [json.loads(d)["scope_id"] for (d,) in conn.execute(
            "SELECT data FROM ledger_entries WHERE session_key = ? AND type = 'om.scope.bound' AND ref = ? "
            "ORDER BY pos DESC", (key, refl_id),
        )]  # fmt: skip
        closed = {r[0] for r in conn.execute(
            "SELECT ref FROM ledger_entries WHERE session_key = ? AND type = 'om.scope.close'", (key,)
        )}  # fmt: skip
        # a reflection promotes through a closed scope it is bound to; open-scope-only binds do not count
        scope_id = next((s for s in binds if s in closed), binds[0] if binds else None)
        return Reflection(id=refl_id, session_id=sid, content=entry.text, timestamp=entry.timestamp,
                          entry_id=entry.id, observation_ids=list(entry.data.get("observation_ids", [])),
                          scope_id=scope_id, scope_closed=scope_id in closed)  # fmt: skip

    def _refs(self, type_: str, ref: str | None = None, key: int | None = None) -> list[tuple[int, str, LedgerEntry]]:
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
        rows = self.connections.get().execute(sql + " ORDER BY e.seq", params).fetchall()
        return [(row[0], row[1], _entry(row[2:])) for row in rows]

    def _observation(self, found: tuple[int, str, LedgerEntry]) -> Observation:
        key, sid, entry = found
        folded = [r[0] for r in self.connections.get().execute(
            "SELECT ref FROM ledger_entries WHERE session_key = ? AND type = 'reflection' AND EXISTS "
            "(SELECT 1 FROM json_each(data, '$.observation_ids') WHERE value = ?) ORDER BY pos", (key, entry.ref),
        )]  # fmt: skip
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
    """Given a SQLite file (the store's), return the ledger of one space; it creates its tables."""
    return Ledger(db, space=space)
