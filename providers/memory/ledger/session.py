"""One session's branch of the ledger: append messages, observe, reflect, open and close work scopes.

Every write is one transaction of the store (or a part of the one its thread is in). On SQLite the
file has one writer at a time; on PostgreSQL a write first takes a transaction-scoped advisory lock
on the ledger of its space, so that the branch positions and the id checks it reads stay true until
it commits. Entry numbers (``seq``, also the message's row in the full-text index) come from the
table's identity sequence there, from ``MAX(seq)`` on SQLite.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from afi.storage.database import Connection

from ..fabric.errors import MemoryConflictError, MemoryNotFoundError, MemoryValidationError
from ..fabric.fields import canonical_time, check_hex
from ..fabric.store import iso_now
from .index import index_messages
from .records import (
    _ENTRY_COLUMNS,
    _INSERT_COLUMNS,
    MAX_ID_CHARS,
    LedgerEntry,
    Observation,
    Reflection,
    WorkScope,
    _check_message,
    _entry,
    _ids,
    _new_id,
    _text,
)

if TYPE_CHECKING:
    from .ledger import Ledger

__all__ = ["LedgerSession"]

_WRITE_LOCK = 0x0AF1_1ED6  # pg_advisory_xact_lock class key; the space's hash is the other key


class LedgerSession:
    """One session's branch: append messages, observe, reflect, open and close work scopes."""

    def __init__(self, ledger: Ledger, session_id: str, key: int) -> None:
        self.ledger = ledger
        self.id = session_id
        self.key = key

    def __repr__(self) -> str:
        return f"LedgerSession({self.id!r})"

    # -- reads -----------------------------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        """Return the whole branch in order, as dicts (``type``, ``id``, ``timestamp``, ...)."""
        return [entry.as_dict() for entry in self.iter_entries()]

    def iter_entries(self, *, types: Iterable[str] | None = None) -> Iterator[LedgerEntry]:
        """Yield the branch's entries in order, optionally only those of some types."""
        sql = f"SELECT {_ENTRY_COLUMNS} FROM ledger_entries WHERE session_key = ?"
        params: list[Any] = [self.key]
        wanted = list(types) if types is not None else []
        if wanted:
            sql += f" AND type IN ({', '.join('?' * len(wanted))})"
            params += wanted
        with self.ledger.database.read() as conn:
            rows = conn.execute(sql + " ORDER BY pos", params).fetchall()
        for row in rows:
            yield _entry(row)

    def entry(self, entry_id: str) -> LedgerEntry | None:
        with self.ledger.database.read() as conn:
            row = conn.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM ledger_entries WHERE session_key = ? AND entry_id = ?",
                (self.key, entry_id),
            ).fetchone()
        return None if row is None else _entry(row)

    def message_count(self) -> int:
        with self.ledger.database.read() as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM ledger_entries WHERE session_key = ? AND mpos IS NOT NULL", (self.key,)
            ).fetchone()
        return int(row[0])

    def scopes(self) -> list[WorkScope]:
        """Return the session's work scopes in the order they were opened."""
        closed = {e.ref: e.timestamp for e in self.iter_entries(types=["om.scope.close"])}
        return [WorkScope(id=e.ref or "", session_id=self.id, name=e.text, opened_at=e.timestamp,
                          closed_at=closed.get(e.ref)) for e in self.iter_entries(types=["om.scope.open"])]  # fmt: skip

    def observation(self, obs_id: str) -> Observation | None:
        return self.ledger.observation(obs_id, session_key=self.key)

    def reflection(self, refl_id: str) -> Reflection | None:
        return self.ledger.reflection(refl_id, session_key=self.key)

    # -- appends ---------------------------------------------------------------------------

    def append(self, *, role: str, text: str, entry_id: str, timestamp: Any = None) -> LedgerEntry:
        """Append one message; return it (the stored one when that id was appended before).

        Raises MemoryValidationError for a bad role, id, text or timestamp, MemoryConflictError when
        the id is already on the branch with other content.
        """
        return self.append_many([{"role": role, "text": text, "entry_id": entry_id, "timestamp": timestamp}])[0]

    def append_many(self, messages: Iterable[Mapping[str, Any]]) -> list[LedgerEntry]:
        """Append messages (``role``, ``text``, ``entry_id``, optional ``timestamp``) in one transaction.

        All or nothing: one bad message refuses the batch. Returns one entry per message, in order.
        """
        now = iso_now()
        batch = [_check_message(m, now) for m in messages]
        ids = [m[0] for m in batch]
        if len(set(ids)) != len(ids):
            raise MemoryValidationError("a batch names the same entry id twice")
        out: list[LedgerEntry] = []
        with self._writing() as conn:
            existing = self._existing(conn, ids)
            pos, mpos, clock = self._next(conn)
            seqs = iter(self._seqs(conn, sum(1 for m in batch if m[0] not in existing)))
            rows, fts = [], []
            for entry_id, role, text, stamp in batch:
                old = existing.get(entry_id)
                if old is not None:
                    if (old.type, old.role, old.text) != ("message", role, text):
                        raise MemoryConflictError(f"entry {entry_id} is already on the branch with other content")
                    out.append(old)
                    continue
                seq = next(seqs)
                # system messages stay on the branch but are not pages of the conversation
                ordinal = mpos if role != "system" else None
                rows.append((seq, self.key, pos, ordinal, clock, entry_id, "message", role, text, stamp, None, "{}"))
                fts.append((seq, f"s{self.key}", text))
                out.append(LedgerEntry(id=entry_id, type="message", role=role, text=text, timestamp=stamp,
                                       position=pos))  # fmt: skip
                pos, mpos, clock = pos + 1, mpos + (ordinal is not None), clock + 1
            if rows:
                conn.executemany(f"INSERT INTO ledger_entries(seq, session_key, pos, mpos, clock, {_INSERT_COLUMNS}) "
                                 "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)  # fmt: skip
                index_messages(self.ledger.database, conn, fts)
        return out

    def observe(self, *, text: str, source_entry_ids: Iterable[str] = (), id: str | None = None,
                entry_id: str | None = None, timestamp: Any = None) -> Observation:  # fmt: skip
        """Record an observation citing messages of this branch; return it (its id is 20 hex).

        Raises MemoryValidationError for bad text or ids, or a cited entry that is not a message here.
        """
        content = _text(text, "observation text")
        sources = _ids(source_entry_ids, "source_entry_ids")
        obs_id = check_hex(id, "observation id") if id is not None else _new_id(self.id, content)
        with self._writing() as conn:
            found = self._existing(conn, sources)
            missing = [s for s in sources if s not in found or found[s].type != "message"]
            if missing:
                raise MemoryValidationError(f"the observation cites entries that are not messages here: {missing}")
            stored = self._om(conn, "observation", obs_id, content, {"source_entry_ids": sources}, entry_id, timestamp)
        observed = self.observation(stored.ref or obs_id)
        assert observed is not None
        return observed

    def reflect(self, *, text: str, observation_ids: Iterable[str], scope_id: str | None = None,
                id: str | None = None, entry_id: str | None = None, timestamp: Any = None) -> Reflection:  # fmt: skip
        """Fold observations of this branch into a reflection; with ``scope_id``, bind it to that open
        work scope (an ``om.scope.bound`` entry). The observations stay readable by their ids.

        Raises MemoryValidationError for bad input, MemoryNotFoundError for an unknown observation or
        scope, MemoryConflictError for a scope that is already closed.
        """
        content = _text(text, "reflection text")
        obs_ids = [check_hex(o, "observation id") for o in _ids(observation_ids, "observation_ids")]
        if not obs_ids:
            raise MemoryValidationError("a reflection folds at least one observation")
        refl_id = check_hex(id, "reflection id") if id is not None else _new_id(self.id, content)
        with self._writing() as conn:
            for obs_id in obs_ids:
                if self.ledger.observation(obs_id, session_key=self.key) is None:
                    raise MemoryNotFoundError(f"unknown observation on this branch: {obs_id}")
            if scope_id is not None:
                self._open_scope_or_refuse(check_hex(scope_id, "scope_id"))
            stored = self._om(conn, "reflection", refl_id, content, {"observation_ids": obs_ids}, entry_id, timestamp)
            refl_id = stored.ref or refl_id
            if scope_id is not None:
                self._bind(conn, refl_id, scope_id, timestamp)
        reflected = self.reflection(refl_id)
        assert reflected is not None
        return reflected

    def bind(self, reflection_id: str, scope_id: str) -> Reflection:
        """Bind an existing reflection to an open work scope of this branch; return the reflection."""
        check_hex(reflection_id, "reflection_id")
        with self._writing() as conn:
            if self.reflection(reflection_id) is None:
                raise MemoryNotFoundError(f"unknown reflection on this branch: {reflection_id}")
            self._open_scope_or_refuse(check_hex(scope_id, "scope_id"))
            self._bind(conn, reflection_id, scope_id, None)
        bound = self.reflection(reflection_id)
        assert bound is not None
        return bound

    def open_scope(self, name: str, *, id: str | None = None, entry_id: str | None = None,
                   timestamp: Any = None) -> WorkScope:  # fmt: skip
        """Open a work scope named ``name``; return it (a retried ``entry_id`` returns the same scope)."""
        label = _text(name, "scope name", cap=MAX_ID_CHARS)
        scope_id = check_hex(id, "scope id") if id is not None else _new_id(self.id, label)
        with self._writing() as conn:
            stored = self._om(conn, "om.scope.open", scope_id, label, {}, entry_id, timestamp)
        return next(s for s in self.scopes() if s.id == stored.ref)

    def close_scope(self, scope_id: str, *, timestamp: Any = None) -> WorkScope:
        """Close an open work scope (closing a closed one changes nothing); return it.

        Raises MemoryNotFoundError for a scope this branch never opened.
        """
        check_hex(scope_id, "scope_id")
        with self._writing() as conn:
            scope = self._scope(scope_id)
            if not scope.closed:
                self._om(conn, "om.scope.close", scope_id, "", {}, f"om.scope.close:{scope_id}", timestamp)
        return self._scope(scope_id)

    # -- internals -------------------------------------------------------------------------

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        with self.ledger.database.transaction() as conn:
            self.ledger.database.engine.lock_space(conn, _WRITE_LOCK, self.ledger.space)
            yield conn

    def _scope(self, scope_id: str) -> WorkScope:
        found = next((s for s in self.scopes() if s.id == scope_id), None)
        if found is None:
            raise MemoryNotFoundError(f"unknown work scope on this branch: {scope_id}")
        return found

    def _open_scope_or_refuse(self, scope_id: str) -> None:
        if self._scope(scope_id).closed:
            raise MemoryConflictError(f"work scope {scope_id} is closed; bind reflections while it is open")

    def _bind(self, conn: Connection, refl_id: str, scope_id: str, timestamp: Any) -> None:
        self._om(conn, "om.scope.bound", refl_id, "", {"scope_id": scope_id},
                 f"om.scope.bound:{refl_id}:{scope_id}", timestamp)  # fmt: skip

    def _existing(self, conn: Connection, ids: list[str]) -> dict[str, LedgerEntry]:
        found: dict[str, LedgerEntry] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = conn.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM ledger_entries WHERE session_key = ? "
                f"AND entry_id IN ({', '.join('?' * len(chunk))})", [self.key, *chunk],
            )  # fmt: skip
            found.update((row[0], _entry(row)) for row in rows)
        return found

    def _next(self, conn: Connection) -> tuple[int, int, int]:
        """The next entry's position, message ordinal and clock (after every entry a sync brought)."""
        pos, mpos, clock = conn.execute(
            "SELECT COALESCE(MAX(pos), -1) + 1, COALESCE(MAX(mpos), -1) + 1, COALESCE(MAX(clock), 0) + 1 "
            "FROM ledger_entries WHERE session_key = ?",
            (self.key,),
        ).fetchone()
        return int(pos), int(mpos), int(clock)

    def _seqs(self, conn: Connection, count: int) -> list[int]:
        """Given how many entries a write adds, return their ``seq`` numbers, ascending."""
        if count <= 0:
            return []
        return self.ledger.database.engine.new_seqs(conn, "ledger_entries", "seq", count)

    def _om(self, conn: Connection, type_: str, ref: str, text: str, data: dict[str, Any],
            entry_id: str | None, timestamp: Any) -> LedgerEntry:  # fmt: skip
        eid = _text(entry_id, "entry_id", cap=MAX_ID_CHARS) if entry_id is not None else f"{type_}:{ref}"
        stamp = canonical_time(timestamp, "timestamp") if timestamp is not None else iso_now()
        old = self._existing(conn, [eid]).get(eid)
        if old is not None:
            # a retry with the same entry id replays the stored record (its id was derived on the first try)
            if (old.type, old.text) != (type_, text) or (old.ref != ref and entry_id is None):
                raise MemoryConflictError(f"entry {eid} is already on the branch with other content")
            return old
        taken = conn.execute(
            "SELECT 1 FROM ledger_entries e JOIN ledger_sessions s ON s.key = e.session_key "
            "WHERE s.space = ? AND e.ref = ? AND e.type = ?", (self.ledger.space, ref, type_),
        ).fetchone()  # fmt: skip
        if taken is not None and type_ in ("observation", "reflection", "om.scope.open"):
            raise MemoryConflictError(f"the id {ref} is already taken by another {type_}")
        pos, _, clock = self._next(conn)
        conn.execute(
            f"INSERT INTO ledger_entries(seq, session_key, pos, mpos, clock, {_INSERT_COLUMNS}) "
            "VALUES (?,?,?,NULL,?,?,?,?,?,?,?,?)",
            (self._seqs(conn, 1)[0], self.key, pos, clock, eid, type_, None, text, stamp, ref, json.dumps(data)),
        )
        return LedgerEntry(id=eid, type=type_, text=text, timestamp=stamp, ref=ref, data=data, position=pos)
