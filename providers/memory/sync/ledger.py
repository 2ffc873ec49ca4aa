"""The ledger in a sync: each session's entries (messages, observations, reflections, work scopes)
travel once, and both sides read a session in the same order.

Entries are never changed once appended, so a sync adds the ones a side lacks (by session and entry
id) and merges nothing. The order of a session is its entries by ``(clock, entry id)``: a local append
takes the session's highest clock plus one, so a session written in one place reads as it was
written; an entry from a peer keeps its clock, so entries appended on both sides since the last sync
interleave the same way on both. Applying a batch inserts what is new and renumbers the positions
from the first entry it placed. An entry id appended on both sides with different content is kept
twice: the content with the smaller digest keeps the id, the other is kept as ``<id>~<digest>``.

A batch is plain JSON, like the notes' (:mod:`.batches`)::

    {"store": <sender's id>, "space": <name>, "since": 0, "upto": 812, "more": false,
     "entries": [{"session": ..., "session_created_at": ..., "entry_id": ..., "type": ..., "role": ...,
                  "text": ..., "timestamp": ..., "ref": ..., "data": {...}, "clock": 17}, ...]}

``since`` and ``upto`` are the sender's entry numbers (``ledger_entries.seq``); an entry that came from
the receiver is left out. A session with no entry yet does not travel.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from afi.errors import AfiError, InvalidPath
from afi.storage.database import Connection, Database

from ..bundle.checks import ENTRY_TYPES, check_instant, check_session_id
from ..ledger.index import index_messages
from ..ledger.records import MAX_ID_CHARS, MAX_TEXT_CHARS, ROLES
from ..ledger.session import _WRITE_LOCK
from .frame import check_frame
from .peers import record_received

__all__ = ["MAX_LEDGER_CHANGES", "LedgerApplied", "LedgerBatch", "apply_ledger_batch", "read_ledger_batch"]

MAX_LEDGER_CHANGES = 500
MAX_LEDGER_BATCH_BYTES = 4 * 1024 * 1024  # of entry text, about; a single longer entry goes alone
MAX_CLOCK = 2**48
_ENTRY_KEYS = ("session", "session_created_at", "entry_id", "type", "role", "text", "timestamp", "ref", "data",
               "clock")  # fmt: skip


@dataclass
class LedgerBatch:
    """One batch of a space's ledger entries, as sent (see the module's docstring)."""

    store: str
    space: str
    since: int
    upto: int
    more: bool
    entries: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "space": self.space, "since": self.since, "upto": self.upto, "more": self.more,
                "entries": self.entries}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any) -> LedgerBatch:
        """Given a batch as received, return it; InvalidPath naming what is wrong with its shape (each
        entry is checked when applied), TooLarge past :data:`MAX_LEDGER_CHANGES`."""
        since, upto = check_frame(data, what="a ledger sync batch", items="entries", cap=MAX_LEDGER_CHANGES)
        return cls(data["store"], data["space"], since, upto, data["more"], data["entries"])


@dataclass
class LedgerApplied:
    """What applying a ledger batch added here: entries, sessions, and ids kept twice (a clash)."""

    entries: int = 0
    sessions: int = 0
    renamed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"entries": self.entries, "sessions": self.sessions, "renamed": self.renamed}

    @classmethod
    def from_json(cls, data: Any) -> LedgerApplied:
        try:
            return cls(int(data["entries"]), int(data["sessions"]), [str(r) for r in data["renamed"]])
        except (KeyError, TypeError, ValueError):
            raise InvalidPath("the peer answered a ledger apply with something that is not a report of one") from None


def read_ledger_batch(database: Database, *, store: str, space: str, since: int, peer: str) -> LedgerBatch:
    """Given a store and a space, return the batch of its ledger entries after ``since`` for ``peer``
    (leaving out those that came from it), within :data:`MAX_LEDGER_BATCH_BYTES` of text."""
    with database.read() as conn:
        rows = conn.execute(
            "SELECT e.seq, s.session_id, s.created_at, e.entry_id, e.type, e.role, e.text, e.timestamp, e.ref, "
            "e.data, e.clock, e.origin FROM ledger_entries e JOIN ledger_sessions s ON s.key = e.session_key "
            f"WHERE s.space = ? AND e.seq > ? ORDER BY e.seq LIMIT {MAX_LEDGER_CHANGES}",
            (space, since),
        ).fetchall()
    batch = LedgerBatch(store, space, since, since, more=len(rows) == MAX_LEDGER_CHANGES)
    budget = MAX_LEDGER_BATCH_BYTES
    for seq, session, created, entry_id, type_, role, text, stamp, ref, data, clock, origin in rows:
        cost = len(text) + len(data) + len(entry_id)
        if batch.entries and cost > budget:
            batch.more = True
            break
        batch.upto = int(seq)
        if origin == peer:
            continue
        budget -= cost
        batch.entries.append({"session": session, "session_created_at": created, "entry_id": entry_id,
                              "type": type_, "role": role, "text": text, "timestamp": stamp, "ref": ref,
                              "data": json.loads(data), "clock": int(clock)})  # fmt: skip
    return batch


def apply_ledger_batch(database: Database, conn: Connection, batch: LedgerBatch, *, space: str,
                       label: str) -> LedgerApplied:  # fmt: skip
    """Add a peer's ledger entries this space lacks and record its ``upto``, in the caller's
    transaction. Raises InvalidPath for an entry that is not one (nothing is added then)."""
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    created: dict[str, str] = {}
    for index, entry in enumerate(batch.entries):
        _check(entry, f"entries[{index}]")
        by_session[entry["session"]].append(entry)
        created[entry["session"]] = min(created.get(entry["session"], entry["session_created_at"]),
                                        entry["session_created_at"])  # fmt: skip
    applied = LedgerApplied()
    if by_session:
        database.engine.lock_space(conn, _WRITE_LOCK, space)
    for session, entries in sorted(by_session.items()):
        key = _session_key(conn, space, session, created[session], applied)
        _add(database, conn, key, entries, batch.store, applied)
    record_received(conn, space, batch.store, label, batch.upto, stream="ledger")
    return applied


def _check(entry: Any, where: str) -> None:
    if not isinstance(entry, dict) or set(entry) != set(_ENTRY_KEYS):
        raise InvalidPath(f"{where}: a ledger entry is an object of exactly {', '.join(_ENTRY_KEYS)}")
    try:
        check_session_id(entry["session"], where)
        check_instant(entry["session_created_at"], "session_created_at", where)
        check_instant(entry["timestamp"], "timestamp", where)
    except AfiError as err:
        raise InvalidPath(f"{where}: {err.message}") from None
    entry_id, type_, role, text, ref = (entry[k] for k in ("entry_id", "type", "role", "text", "ref"))
    if not isinstance(entry_id, str) or not entry_id or len(entry_id) > MAX_ID_CHARS or "\x00" in entry_id:
        raise InvalidPath(f"{where}: entry_id is 1..{MAX_ID_CHARS} characters")
    if not isinstance(type_, str) or type_ not in ENTRY_TYPES:
        raise InvalidPath(f"{where}: type {type_!r} is not one of {', '.join(sorted(ENTRY_TYPES))}")
    if (type_ == "message") != (role is not None) or (
        role is not None and (not isinstance(role, str) or role not in ROLES)
    ):
        raise InvalidPath(f"{where}: a message has a role ({', '.join(ROLES)}), other entries none")
    if not isinstance(text, str) or len(text) > MAX_TEXT_CHARS or "\x00" in text:
        raise InvalidPath(f"{where}: text is a string of at most {MAX_TEXT_CHARS} characters")
    if ref is not None and (not isinstance(ref, str) or len(ref) > MAX_ID_CHARS):
        raise InvalidPath(f"{where}: ref is null or up to {MAX_ID_CHARS} characters")
    if not isinstance(entry["data"], dict):
        raise InvalidPath(f"{where}: data is an object")
    clock = entry["clock"]
    if not isinstance(clock, int) or isinstance(clock, bool) or not 1 <= clock <= MAX_CLOCK:
        raise InvalidPath(f"{where}: clock is a whole number from 1 to {MAX_CLOCK}")


def _session_key(conn: Connection, space: str, session: str, created: str, applied: LedgerApplied) -> int:
    """The session's key here, made when new; a session made on both sides keeps the earlier time."""
    row = conn.execute("SELECT key, created_at FROM ledger_sessions WHERE space = ? AND session_id = ?",
                       (space, session)).fetchone()  # fmt: skip
    if row is None:
        applied.sessions += 1
        return int(conn.execute("INSERT INTO ledger_sessions (space, session_id, created_at) VALUES (?, ?, ?) "
                                "RETURNING key", (space, session, created)).fetchone()[0])  # fmt: skip
    if created < str(row[1]):
        conn.execute("UPDATE ledger_sessions SET created_at = ? WHERE key = ?", (created, row[0]))
    return int(row[0])


def _content(entry: dict[str, Any]) -> tuple[Any, ...]:
    return (entry["type"], entry["role"], entry["text"], entry["timestamp"], entry["ref"],
            json.dumps(entry["data"], sort_keys=True, separators=(",", ":")))  # fmt: skip


def _digest(content: tuple[Any, ...]) -> str:
    return hashlib.sha256(json.dumps(content, separators=(",", ":")).encode("utf-8", "surrogatepass")).hexdigest()


def _renamed(entry_id: str, content: tuple[Any, ...]) -> str:
    return f"{entry_id[: MAX_ID_CHARS - 9]}~{_digest(content)[:8]}"


def _add(database: Database, conn: Connection, key: int, entries: list[dict[str, Any]], origin: str,
         applied: LedgerApplied) -> None:  # fmt: skip
    """Insert the session's entries it lacks, then put the session back in (clock, entry id) order."""
    held: dict[str, tuple[Any, ...]] = {}
    clocks: dict[str, int] = {}
    for row in conn.execute("SELECT entry_id, type, role, text, timestamp, ref, data, clock FROM ledger_entries "
                            "WHERE session_key = ?", (key,)).fetchall():  # fmt: skip
        data = json.dumps(json.loads(row[6]), sort_keys=True, separators=(",", ":"))
        held[str(row[0])], clocks[str(row[0])] = (*row[1:6], data), int(row[7])
    fresh: list[tuple[str, dict[str, Any]]] = []
    earliest: int | None = None  # the first clock whose entries move
    for entry in entries:
        entry_id, content = entry["entry_id"], _content(entry)
        ours = held.get(entry_id)
        if ours == content:
            if entry["clock"] < clocks[entry_id]:  # appended alike on both sides: the earlier clock holds
                conn.execute("UPDATE ledger_entries SET clock = ? WHERE session_key = ? AND entry_id = ?",
                             (entry["clock"], key, entry_id))  # fmt: skip
                clocks[entry_id] = entry["clock"]
                earliest = min(entry["clock"], earliest or entry["clock"])
            continue
        if ours is not None:  # one id, two contents: the smaller digest keeps the id
            if _digest(content) < _digest(ours):
                moved = _renamed(entry_id, ours)
                conn.execute("UPDATE ledger_entries SET entry_id = ? WHERE session_key = ? AND entry_id = ?",
                             (moved, key, entry_id))  # fmt: skip
                held[moved], clocks[moved] = ours, clocks[entry_id]
                applied.renamed.append(moved)
            else:
                entry_id = _renamed(entry_id, content)
                applied.renamed.append(entry_id)
                if held.get(entry_id) == content:
                    continue
        held[entry_id], clocks[entry_id] = content, entry["clock"]
        fresh.append((entry_id, entry))
    if fresh:
        _insert(database, conn, key, fresh, origin)
        applied.entries += len(fresh)
        earliest = min([e["clock"] for _, e in fresh] + ([earliest] if earliest is not None else []))
    if earliest is not None:
        _renumber(conn, key, earliest)


def _insert(database: Database, conn: Connection, key: int, fresh: list[tuple[str, dict[str, Any]]],
            origin: str) -> None:  # fmt: skip
    seqs = database.engine.new_seqs(conn, "ledger_entries", "seq", len(fresh))
    messages = []
    for seq, (entry_id, e) in zip(seqs, fresh, strict=True):
        # a place no entry holds until the session is renumbered below
        conn.execute(
            "INSERT INTO ledger_entries (seq, session_key, pos, mpos, clock, entry_id, type, role, text, timestamp, "
            "ref, data, origin) VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (seq, key, -1 - seq, e["clock"], entry_id, e["type"], e["role"], e["text"], e["timestamp"], e["ref"],
             json.dumps(e["data"]), origin),
        )  # fmt: skip
        if e["type"] == "message":
            messages.append((seq, f"s{key}", e["text"]))
    if messages:
        index_messages(database, conn, messages)


def _renumber(conn: Connection, key: int, from_clock: int) -> None:
    """Give the session's entries from ``from_clock`` on their places in (clock, entry id) order."""
    pos, mpos = conn.execute(
        "SELECT COUNT(*), COUNT(*) FILTER (WHERE type = 'message' AND role <> 'system') FROM ledger_entries "
        "WHERE session_key = ? AND clock < ?", (key, from_clock),
    ).fetchone()  # fmt: skip
    pos, mpos = int(pos), int(mpos)
    moves = []
    for seq, old_pos, old_mpos, type_, role in conn.execute(
        "SELECT seq, pos, mpos, type, role FROM ledger_entries WHERE session_key = ? AND clock >= ? "
        "ORDER BY clock, entry_id", (key, from_clock),
    ).fetchall():  # fmt: skip
        ordinal = mpos if type_ == "message" and role != "system" else None
        if (old_pos, old_mpos) != (pos, ordinal):
            moves.append((int(seq), pos, ordinal))
        pos, mpos = pos + 1, mpos + (ordinal is not None)
    # two passes: out of every place first, so no two entries hold one place on the way
    conn.executemany("UPDATE ledger_entries SET pos = ?, mpos = NULL WHERE seq = ?",
                     [(-1 - seq, seq) for seq, _, _ in moves])  # fmt: skip
    conn.executemany("UPDATE ledger_entries SET pos = ?, mpos = ? WHERE seq = ?",
                     [(p, m, seq) for seq, p, m in moves])  # fmt: skip
