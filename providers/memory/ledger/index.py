"""The ledger's full-text index of messages, on either engine: what an append adds to it and the
candidates a conversation search scores.

On SQLite the index is the FTS5 table ``ledger_fts`` (contentless; ``sess`` is ``s<session key>``,
``body`` the message under the unicode61 tokenizer, diacritics removed). On PostgreSQL it is a table
of the same name whose ``body`` (GIN index) is a ``tsvector`` of the message's words as
:func:`message_words` finds them, the way FTS5 tokenizes: lowercase runs of letters and digits,
diacritics removed. The words become lexemes as they are (``array_to_tsvector``), not through
PostgreSQL's text-search parser, whose idea of a word follows the database's locale (under
``C.UTF-8`` it drops ``²`` from ``x²``) and which reads URLs, file names and hyphenated words whole.
A query term is folded the same way and matched as one quoted lexeme. Terms reach either engine as
statement parameters, never as SQL.

A set abort signal stops a running search: on SQLite the connection's progress handler interrupts
the statement; on PostgreSQL a watcher thread cancels it (psycopg's ``cancel_safe``). Either way the
caller gets :class:`ConversationAbortedError`.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sqlite3
import threading
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, cast

from afi.storage.database import Connection, Database

from ..fabric.errors import MemoryValidationError

if TYPE_CHECKING:
    from .session import LedgerSession

__all__ = ["ConversationAbortedError", "best_messages", "index_messages", "is_aborted", "message_words"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_PROGRESS_STEPS = 1000  # SQLite VM steps between two looks at the abort signal
_WATCH_SECONDS = 0.02  # how often the PostgreSQL watcher looks at the abort signal
_CANCEL_TIMEOUT_SECONDS = 5.0
_MAX_LEXEME_BYTES = 2047
_ROLES = "e.role IN ('user', 'assistant', 'tool')"


class ConversationAbortedError(MemoryValidationError):
    """The caller's abort signal was set: the scan stopped and nothing was returned."""


def is_aborted(signal: Any) -> bool:
    """Given an abort signal (an Event-like ``is_set()`` or an ``aborted`` attribute, or None), say
    whether it is set."""
    if signal is None:
        return False
    is_set = getattr(signal, "is_set", None)
    return bool(is_set()) if callable(is_set) else bool(getattr(signal, "aborted", False))


def message_words(text: str) -> list[str]:
    """Given a message or query term, return its words as the PostgreSQL index holds them: lowercase
    runs of letters and digits, Latin letters without their diacritics (as FTS5's unicode61 tokenizer
    with ``remove_diacritics 2`` does: ``Café`` is ``cafe``, ``ёлка`` stays); a word too long for a
    ``tsvector`` is its SHA-256 digest instead."""
    words = _WORD.findall("".join(_bare(c) for c in unicodedata.normalize("NFC", text)).lower())
    return [w if len(w.encode()) <= _MAX_LEXEME_BYTES else _digest(w) for w in words]


def _digest(word: str) -> str:
    # a lexeme is at most 2047 bytes: a longer word's digest stands for it, in the index and in a query
    return "z" + hashlib.sha256(word.encode()).hexdigest()


def _lexemes(term: str) -> str:
    """Given a query term, return it as ``tsquery`` input: its word as one quoted lexeme (quotes and
    backslashes doubled, though a word has none)."""
    words = message_words(term) or [term]
    return " & ".join("'" + w.replace("\\", "\\\\").replace("'", "''") + "'" for w in words)


@functools.lru_cache(maxsize=4096)
def _bare(char: str) -> str:
    parts = unicodedata.normalize("NFD", char)
    if len(parts) == 1 or not unicodedata.name(parts[0], "").startswith("LATIN "):
        return char
    return "".join(c for c in parts if not unicodedata.combining(c))


def _sqlite_index(conn: Connection, rows: Sequence[tuple[int, str, str]]) -> None:
    conn.executemany("INSERT INTO ledger_fts(rowid, sess, body) VALUES (?,?,?)", rows)


def _pg_index(conn: Connection, rows: Sequence[tuple[int, str, str]]) -> None:
    conn.executemany(
        "INSERT INTO ledger_fts(rowid, sess, body) VALUES (?, ?, array_to_tsvector(?::text[]))",
        [(seq, sess, message_words(text)) for seq, sess, text in rows],
    )


def index_messages(database: Database, conn: Connection, rows: Sequence[tuple[int, str, str]]) -> None:
    """Given the store, a connection inside the append's transaction and new messages as
    (seq, ``s<session key>``, text), add them to the full-text index."""
    database.engine.choose(sqlite=_sqlite_index, postgresql=_pg_index)(conn, rows)


def best_messages(session: LedgerSession, terms: list[str], top_k: int,
                  signal: Any) -> tuple[list[tuple[str, float, str]], int]:  # fmt: skip
    """Given a session, query terms (distinct, lowercase) and ``top_k``, return the best messages as
    (entry id, coverage, timestamp), best first, ties newest first, and how many were scored.

    The messages holding every term come first: when there are ``top_k`` of them the best hits are
    among them (coverage 1) and only they are scored; otherwise every message holding any term is.
    Raises ConversationAbortedError once ``signal`` is set while a statement runs.
    """
    database = session.ledger.database
    best = database.engine.choose(sqlite=_sqlite_best, postgresql=_pg_best)
    with database.read() as conn:
        return best(conn, f"s{session.key}", terms, top_k, signal)


def _sqlite_best(conn: Connection, sess: str, terms: list[str], top_k: int,
                 signal: Any) -> tuple[list[tuple[str, float, str]], int]:  # fmt: skip
    marker = f'sess : "{sess}"'
    every = f"{marker} AND " + " AND ".join(f'body : "{t}"' for t in terms)
    full = ("SELECT e.entry_id, e.timestamp, COUNT(*) OVER () FROM ledger_entries e WHERE e.seq IN "
            f"(SELECT rowid FROM ledger_fts WHERE ledger_fts MATCH ?) AND {_ROLES} "
            "ORDER BY e.timestamp DESC, e.entry_id ASC LIMIT ?")  # fmt: skip
    found = _interruptible(conn, signal, lambda: conn.execute(full, (every, top_k)).fetchall())
    if len(found) >= top_k or len(terms) == 1:
        return [(r[0], 1.0, r[1]) for r in found], int(found[0][2]) if found else 0
    union = " UNION ALL ".join("SELECT rowid FROM ledger_fts WHERE ledger_fts MATCH ?" for _ in terms)
    params = [f'{marker} AND body : "{t}"' for t in terms]
    sql = (f"WITH hits(seq, n) AS (SELECT rowid, COUNT(*) FROM ({union}) GROUP BY rowid) "
           "SELECT e.entry_id, h.n, e.timestamp, COUNT(*) OVER () FROM hits h JOIN ledger_entries e "
           f"ON e.seq = h.seq WHERE {_ROLES} "
           "ORDER BY h.n DESC, e.timestamp DESC, e.entry_id ASC LIMIT ?")  # fmt: skip
    rows = _interruptible(conn, signal, lambda: conn.execute(sql, [*params, top_k]).fetchall())
    scanned = int(rows[0][3]) if rows else 0
    return [(r[0], r[1] / len(terms), r[2]) for r in rows], scanned


def _pg_best(conn: Connection, sess: str, terms: list[str], top_k: int,
             signal: Any) -> tuple[list[tuple[str, float, str]], int]:  # fmt: skip
    folded = [_lexemes(t) for t in terms]  # each term its own tsquery, as each is its own FTS5 phrase
    every = " AND ".join("body @@ ?::tsquery" for _ in folded)
    full = ("SELECT e.entry_id, e.timestamp, COUNT(*) OVER () FROM ledger_entries e WHERE e.seq IN "
            f"(SELECT rowid FROM ledger_fts WHERE sess = ? AND {every}) AND {_ROLES} "
            "ORDER BY e.timestamp DESC, e.entry_id ASC LIMIT ?")  # fmt: skip
    with _cancelling(conn, signal):
        found = conn.execute(full, [sess, *folded, top_k]).fetchall()
    if len(found) >= top_k or len(terms) == 1:
        return [(r[0], 1.0, r[1]) for r in found], int(found[0][2]) if found else 0
    union = " UNION ALL ".join("SELECT rowid FROM ledger_fts WHERE sess = ? AND body @@ ?::tsquery" for _ in folded)
    sql = (f"WITH hits(seq, n) AS (SELECT rowid, COUNT(*) FROM ({union}) AS m GROUP BY rowid) "
           "SELECT e.entry_id, h.n, e.timestamp, COUNT(*) OVER () FROM hits h JOIN ledger_entries e "
           f"ON e.seq = h.seq WHERE {_ROLES} "
           "ORDER BY h.n DESC, e.timestamp DESC, e.entry_id ASC LIMIT ?")  # fmt: skip
    params: list[Any] = [p for term in folded for p in (sess, term)]
    with _cancelling(conn, signal):
        rows = conn.execute(sql, [*params, top_k]).fetchall()
    scanned = int(rows[0][3]) if rows else 0
    return [(r[0], int(r[1]) / len(terms), r[2]) for r in rows], scanned


def _aborted_error() -> ConversationAbortedError:
    return ConversationAbortedError("the conversation search was aborted")


def _interruptible(conn: Connection, signal: Any, run: Callable[[], list[Any]]) -> list[Any]:
    if signal is None:
        return run()
    raw = cast(sqlite3.Connection, conn)
    raw.set_progress_handler(lambda: 1 if is_aborted(signal) else 0, _PROGRESS_STEPS)
    try:
        return run()
    except sqlite3.OperationalError as err:
        if is_aborted(signal):
            raise _aborted_error() from err
        raise
    finally:
        raw.set_progress_handler(None, 0)


@contextmanager
def _cancelling(conn: Connection, signal: Any) -> Iterator[None]:
    """Run the block's statement with a watcher thread that cancels it once ``signal`` is set.

    The watcher is joined before the block's caller goes on, so its cancel cannot reach a later
    statement on the connection (a cancel that finds the connection idle is ignored by the server).
    """
    if signal is None:
        yield
        return
    import psycopg

    raw: psycopg.Connection[Any] = cast(Any, conn).raw
    stop, fired = threading.Event(), threading.Event()

    def watch() -> None:
        while not stop.wait(_WATCH_SECONDS):
            if is_aborted(signal):
                fired.set()
                with suppress(psycopg.Error):  # else the statement runs to its end; the caller still sees the abort
                    raw.cancel_safe(timeout=_CANCEL_TIMEOUT_SECONDS)
                return

    watcher = threading.Thread(target=watch, name="afi-ledger-abort", daemon=True)
    watcher.start()
    try:
        yield
    except psycopg.errors.QueryCanceled as err:
        if fired.is_set() or is_aborted(signal):
            raise _aborted_error() from err
        raise
    finally:
        stop.set()
        watcher.join()
    if fired.is_set():  # the cancel came after the statement ended: still aborted
        raise _aborted_error()
