"""The observational ledger: sessions, their ordered branch, observations, reflections and work scopes.

One SQLite file (the store's), its own tables. A session's branch is an append-only sequence of
entries: messages (``role``/``text``) and the ledger's own records, ``observation`` and
``reflection`` (12-hex ids), and ``om.scope.open``/``om.scope.close``/``om.scope.bound``. The host
writes observations and reflections; nothing here calls a model. An append is idempotent by entry id
(the same id with the same content is a no-op, with other content a conflict) and never reorders.
Messages are indexed in FTS5 for :mod:`.conversation`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from afi.sqlite import Connections

from .errors import MemoryConflictError, MemoryNotFoundError, MemoryValidationError
from .memory import canonical_time, check_hex
from .store import iso_now

__all__ = [
    "LEDGER_OPS",
    "ROLES",
    "SCHEMA",
    "Ledger",
    "LedgerEntry",
    "LedgerSession",
    "Observation",
    "Reflection",
    "WorkScope",
    "apply_op",
    "create_ledger",
]

ROLES = ("user", "assistant", "tool", "system")
MAX_ID_CHARS = 200
MAX_TEXT_CHARS = 64_384

SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_sessions (
    key INTEGER PRIMARY KEY AUTOINCREMENT,
    space TEXT NOT NULL,
    session_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE(space, session_id)
);
CREATE TABLE IF NOT EXISTS ledger_entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key INTEGER NOT NULL REFERENCES ledger_sessions(key),
    pos INTEGER NOT NULL,
    mpos INTEGER,
    entry_id TEXT NOT NULL,
    type TEXT NOT NULL,
    role TEXT,
    text TEXT NOT NULL DEFAULT '',
    timestamp TEXT NOT NULL,
    ref TEXT,
    data TEXT NOT NULL DEFAULT '{}',
    UNIQUE(session_key, entry_id),
    UNIQUE(session_key, pos)
);
CREATE UNIQUE INDEX IF NOT EXISTS ledger_entries_mpos ON ledger_entries(session_key, mpos) WHERE mpos IS NOT NULL;
CREATE INDEX IF NOT EXISTS ledger_entries_ref ON ledger_entries(ref) WHERE ref IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS ledger_fts USING fts5(
    sess, body, content='', tokenize='unicode61 remove_diacritics 2'
);
"""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LedgerEntry(_Model):
    """One entry of a branch; ``position`` is its place in the branch (0-based)."""

    id: str
    type: str
    timestamp: str
    position: int
    role: str | None = None
    text: str = ""
    ref: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Return the entry as ``session.entries()`` yields it (messages; om.* records with their id)."""
        if self.type == "message":
            return {"type": "message", "id": self.id, "role": self.role, "text": self.text,
                    "timestamp": self.timestamp}  # fmt: skip
        out: dict[str, Any] = {"type": self.type, "id": self.ref, "entry_id": self.id, "timestamp": self.timestamp}
        if self.type in ("observation", "reflection"):
            out["content"] = self.text
        elif self.type == "om.scope.open":
            out["name"] = self.text
        return out | self.data


class Observation(_Model):
    id: str
    session_id: str
    content: str
    timestamp: str
    entry_id: str
    source_entry_ids: list[str] = Field(default_factory=list)
    folded_into: list[str] = Field(default_factory=list)


class Reflection(_Model):
    id: str
    session_id: str
    content: str
    timestamp: str
    entry_id: str
    observation_ids: list[str] = Field(default_factory=list)
    scope_id: str | None = None
    scope_closed: bool = False


class WorkScope(_Model):
    id: str
    session_id: str
    name: str
    opened_at: str
    closed_at: str | None = None

    @property
    def closed(self) -> bool:
        return self.closed_at is not None


def _text(value: Any, label: str, *, cap: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str) or not value.strip():
        raise MemoryValidationError(f"{label} must be a non-empty string")
    if len(value) > cap:
        raise MemoryValidationError(f"{label} is {len(value)} characters; the cap is {cap}")
    return value


def _new_id(*parts: str) -> str:
    return hashlib.sha256("\x00".join((*parts, uuid.uuid4().hex)).encode()).hexdigest()[:12]


def _entry(row: sqlite3.Row | tuple[Any, ...]) -> LedgerEntry:
    entry_id, type_, role, text, timestamp, ref, data, pos = row
    return LedgerEntry(id=entry_id, type=type_, role=role, text=text, timestamp=timestamp, ref=ref,
                       data=json.loads(data), position=pos)  # fmt: skip


_ENTRY_COLUMNS = "entry_id, type, role, text, timestamp, ref, data, pos"


class Ledger:
    """The ledger of one space in one SQLite file; ``session(id)`` gets or creates a session."""

    def __init__(self, db: str | Path, *, space: str = "default") -> None:
        self.db = Path(db)
        self.space = _text(space, "space", cap=MAX_ID_CHARS)
        self.connections = Connections(self.db, schema=SCHEMA)

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
        for row in self.ledger.connections.get().execute(sql + " ORDER BY pos", params):
            yield _entry(row)

    def entry(self, entry_id: str) -> LedgerEntry | None:
        row = (
            self.ledger.connections.get()
            .execute(
                f"SELECT {_ENTRY_COLUMNS} FROM ledger_entries WHERE session_key = ? AND entry_id = ?",
                (self.key, entry_id),
            )
            .fetchone()
        )
        return None if row is None else _entry(row)

    def message_count(self) -> int:
        row = (
            self.ledger.connections.get()
            .execute("SELECT COUNT(*) FROM ledger_entries WHERE session_key = ? AND mpos IS NOT NULL", (self.key,))
            .fetchone()
        )
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
            pos, mpos, seq = self._next(conn)
            rows, fts = [], []
            for entry_id, role, text, stamp in batch:
                old = existing.get(entry_id)
                if old is not None:
                    if (old.type, old.role, old.text) != ("message", role, text):
                        raise MemoryConflictError(f"entry {entry_id} is already on the branch with other content")
                    out.append(old)
                    continue
                seq += 1
                # system messages stay on the branch but are not pages of the conversation
                ordinal = mpos if role != "system" else None
                rows.append((seq, self.key, pos, ordinal, entry_id, "message", role, text, stamp, None, "{}"))
                fts.append((seq, f"s{self.key}", text))
                out.append(LedgerEntry(id=entry_id, type="message", role=role, text=text, timestamp=stamp,
                                       position=pos))  # fmt: skip
                pos, mpos = pos + 1, mpos + (ordinal is not None)
            conn.executemany(f"INSERT INTO ledger_entries(seq, session_key, pos, mpos, {_INSERT_COLUMNS}) "
                             "VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)  # fmt: skip
            conn.executemany("INSERT INTO ledger_fts(rowid, sess, body) VALUES (?,?,?)", fts)
        return out

    def observe(self, *, text: str, source_entry_ids: Iterable[str] = (), id: str | None = None,
                entry_id: str | None = None, timestamp: Any = None) -> Observation:  # fmt: skip
        """Record an observation citing messages of this branch; return it (its id is 12 hex).

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
    def _writing(self) -> Iterator[sqlite3.Connection]:
        with self.ledger.connections.transaction() as conn:
            yield conn

    def _scope(self, scope_id: str) -> WorkScope:
        found = next((s for s in self.scopes() if s.id == scope_id), None)
        if found is None:
            raise MemoryNotFoundError(f"unknown work scope on this branch: {scope_id}")
        return found

    def _open_scope_or_refuse(self, scope_id: str) -> None:
        if self._scope(scope_id).closed:
            raise MemoryConflictError(f"work scope {scope_id} is closed; bind reflections while it is open")

    def _bind(self, conn: sqlite3.Connection, refl_id: str, scope_id: str, timestamp: Any) -> None:
        self._om(conn, "om.scope.bound", refl_id, "", {"scope_id": scope_id},
                 f"om.scope.bound:{refl_id}:{scope_id}", timestamp)  # fmt: skip

    def _existing(self, conn: sqlite3.Connection, ids: list[str]) -> dict[str, LedgerEntry]:
        found: dict[str, LedgerEntry] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = conn.execute(
                f"SELECT {_ENTRY_COLUMNS} FROM ledger_entries WHERE session_key = ? "
                f"AND entry_id IN ({', '.join('?' * len(chunk))})", [self.key, *chunk],
            )  # fmt: skip
            found.update((row[0], _entry(row)) for row in rows)
        return found

    def _next(self, conn: sqlite3.Connection) -> tuple[int, int, int]:
        pos, mpos = conn.execute(
            "SELECT COALESCE(MAX(pos), -1) + 1, COALESCE(MAX(mpos), -1) + 1 FROM ledger_entries WHERE session_key = ?",
            (self.key,),
        ).fetchone()
        seq = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM ledger_entries").fetchone()[0]
        return int(pos), int(mpos), int(seq)

    def _om(self, conn: sqlite3.Connection, type_: str, ref: str, text: str, data: dict[str, Any],
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
        pos, _, seq = self._next(conn)
        conn.execute(
            f"INSERT INTO ledger_entries(seq, session_key, pos, mpos, {_INSERT_COLUMNS}) "
            "VALUES (?,?,?,NULL,?,?,?,?,?,?,?)",
            (seq + 1, self.key, pos, eid, type_, None, text, stamp, ref, json.dumps(data)),
        )
        return LedgerEntry(id=eid, type=type_, text=text, timestamp=stamp, ref=ref, data=data, position=pos)


_INSERT_COLUMNS = "entry_id, type, role, text, timestamp, ref, data"


def _ids(values: Iterable[str], label: str) -> list[str]:
    if isinstance(values, str):
        raise MemoryValidationError(f"{label} must be a list of ids, not one string")
    out = [_text(v, label, cap=MAX_ID_CHARS) for v in values]
    return list(dict.fromkeys(out))


def _check_message(message: Mapping[str, Any], now: str) -> tuple[str, str, str, str]:
    unknown = set(message) - {"role", "text", "entry_id", "timestamp"}
    if unknown:
        raise MemoryValidationError(f"unknown message field(s): {', '.join(sorted(unknown))}")
    role = message.get("role")
    if role not in ROLES:
        raise MemoryValidationError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    entry_id = _text(message.get("entry_id"), "entry_id", cap=MAX_ID_CHARS)
    text = _text(message.get("text"), "message text")
    stamp = message.get("timestamp")
    return entry_id, str(role), text, canonical_time(stamp, "timestamp") if stamp is not None else now


def create_ledger(db: str | Path, *, space: str = "default") -> Ledger:
    """Given a SQLite file (the store's), return the ledger of one space; it creates its tables."""
    return Ledger(db, space=space)


_OPS: dict[str, tuple[str, frozenset[str]]] = {
    "append": ("append_many", frozenset({"messages"})),
    "observe": ("observe", frozenset({"text", "source_entry_ids", "id", "entry_id", "timestamp"})),
    "reflect": ("reflect", frozenset({"text", "observation_ids", "scope_id", "id", "entry_id", "timestamp"})),
    "scope.open": ("open_scope", frozenset({"name", "id", "entry_id", "timestamp"})),
    "scope.close": ("close_scope", frozenset({"scope_id", "timestamp"})),
    "bind": ("bind", frozenset({"reflection_id", "scope_id"})),
}
LEDGER_OPS: tuple[str, ...] = tuple(_OPS)
_REQUIRED: dict[str, frozenset[str]] = {
    "observe": frozenset({"text"}),
    "reflect": frozenset({"text", "observation_ids"}),
}


def apply_op(ledger: Ledger, op: str, session_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """Given an operation name (:data:`LEDGER_OPS`), a session id and a JSON body, run it and return
    a JSON-ready result. What every remote door (HTTP, MCP, CLI) calls; unknown ops or fields refused."""
    if op not in _OPS:
        raise MemoryValidationError(f"unknown ledger operation {op!r} (known: {', '.join(LEDGER_OPS)})")
    method, allowed = _OPS[op]
    if not isinstance(body, Mapping):
        raise MemoryValidationError("the body must be a JSON object")
    unknown = set(body) - allowed
    if unknown:
        raise MemoryValidationError(f"unknown field(s) for {op}: {', '.join(sorted(unknown))}")
    missing = _REQUIRED.get(op, frozenset()) - set(body)
    if missing:
        raise MemoryValidationError(f"{op} needs the field(s): {', '.join(sorted(missing))}")
    session = ledger.session(session_id)
    args = dict(body)
    if op == "append":
        messages = args.get("messages")
        if not isinstance(messages, list) or not messages:
            raise MemoryValidationError("append takes messages: a non-empty list of {role, text, entry_id}")
        if not all(isinstance(m, Mapping) for m in messages):
            raise MemoryValidationError("each message is an object {role, text, entry_id, timestamp?}")
        return {"session": session.id, "entries": [e.model_dump() for e in session.append_many(messages)]}
    if op == "scope.open":
        return {"session": session.id, "scope": session.open_scope(args.pop("name", None), **args).model_dump()}
    if op == "scope.close":
        return {"session": session.id, "scope": session.close_scope(args.pop("scope_id", None), **args).model_dump()}
    if op == "bind":
        return {"session": session.id, "reflection": session.bind(args.get("reflection_id", ""),
                                                                   args.get("scope_id", "")).model_dump()}  # fmt: skip
    result = getattr(session, method)(**args)
    return {"session": session.id, op.replace("observe", "observation").replace("reflect", "reflection"):
            result.model_dump()}  # fmt: skip
