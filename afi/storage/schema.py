"""The SQLite form of step 1 of the one step list (:mod:`.steps`; :mod:`.migrations` runs them); the
later steps' forms are :mod:`.lite_steps`.

Step 1 is the layout the store had before migrations were recorded, written so that it is a no-op on
such a store (``if_not_exists`` / ``IF NOT EXISTS`` throughout): an existing file is adopted as
version 1, a new one gets every table. Plain tables and indexes are created through sqlite-utils; SQL
is written out only for what its ``create`` cannot say: ``UNIQUE`` table or column constraints,
``AUTOINCREMENT``, a ``REFERENCES`` beside those, FTS5 tables with their options, triggers and
partial indexes.

A later change is a new step appended to :data:`.steps.STEPS` with a form for each engine (say
``db.table("notes").add_column(...)`` in :mod:`.lite_steps`); a step once released is never edited.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils

__all__ = ["holds_anything", "initial_layout"]

_SCOPE = {"tenant_id": str, "resource_id": str, "thread_id": str}
_SCOPE_KEY = ("tenant_id", "resource_id", "thread_id")


def _auth(db: sqlite_utils.Database) -> None:
    """The auth door's tables: API keys, SSH keys, the audit log, idempotency receipts."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS afi_keys (
            id TEXT PRIMARY KEY,
            name TEXT,
            space TEXT NOT NULL,
            scopes TEXT NOT NULL,
            token_sha256 TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            revoked_at TEXT
        );
        CREATE TABLE IF NOT EXISTS afi_ssh_keys (
            id TEXT PRIMARY KEY,
            name TEXT,
            fingerprint TEXT NOT NULL UNIQUE,
            public_key TEXT NOT NULL,
            space TEXT,
            scopes TEXT,
            api_key TEXT,
            created_at TEXT NOT NULL,
            revoked_at TEXT
        );
        CREATE TABLE IF NOT EXISTS audit (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            principal TEXT NOT NULL,
            space TEXT NOT NULL,
            verb TEXT NOT NULL,
            path TEXT NOT NULL,
            result TEXT NOT NULL
        );
        """
    )
    receipts = {"principal": str, "space": str, "tool": str, "key": str, "args_sha256": str, "execution_id": str}
    db.table("afi_receipts").create(
        {**receipts, "status": str, "result": str, "started_at": float, "completed_at": float},
        pk=("principal", "space", "tool", "key"),
        not_null={*receipts, "status", "started_at"},
        if_not_exists=True,
    )
    db.table("afi_receipts").create_index(["started_at"], index_name="afi_receipts_started", if_not_exists=True)


def _fabric(db: sqlite_utils.Database) -> None:
    """The memory fabric's tables: notes with two FTS5 indexes, lineage, working blocks, changes, meta."""
    db.table("meta").create({"key": str, "value": str}, pk="key", if_not_exists=True)
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS notes (
            rowid INTEGER PRIMARY KEY,
            tenant_id TEXT NOT NULL, resource_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT, content TEXT NOT NULL,
            ingested_at TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT, token_count INTEGER NOT NULL,
            t_ref TEXT, valid_from TEXT, valid_to TEXT, supersedes TEXT, links TEXT, tags TEXT, keywords TEXT,
            context TEXT, importance REAL, source_entry_ids TEXT, path TEXT, block TEXT, promoted_from TEXT,
            consent TEXT, status TEXT NOT NULL DEFAULT 'active', forgotten_at TEXT,
            seq INTEGER NOT NULL, rendered TEXT NOT NULL, embedding BLOB,
            UNIQUE (tenant_id, resource_id, thread_id, id)
        );
        """
    )
    db.table("notes").create_index([*_SCOPE_KEY, "kind", "name"], index_name="notes_kind_name", if_not_exists=True)
    db.executescript(
        """
        CREATE INDEX IF NOT EXISTS notes_path ON notes (tenant_id, resource_id, thread_id, path)
            WHERE path IS NOT NULL;
        CREATE VIRTUAL TABLE IF NOT EXISTS notes_trigram USING fts5(
            rendered, content='notes', content_rowid='rowid', tokenize='trigram');
        CREATE VIRTUAL TABLE IF NOT EXISTS notes_lexical USING fts5(
            content, tags, keywords, context, content='notes', content_rowid='rowid',
            tokenize='porter unicode61');
        CREATE TRIGGER IF NOT EXISTS notes_ai AFTER INSERT ON notes BEGIN
            INSERT INTO notes_trigram (rowid, rendered) VALUES (new.rowid, new.rendered);
            INSERT INTO notes_lexical (rowid, content, tags, keywords, context)
                VALUES (new.rowid, new.content, new.tags, new.keywords, new.context);
        END;
        CREATE TRIGGER IF NOT EXISTS notes_ad AFTER DELETE ON notes BEGIN
            INSERT INTO notes_trigram (notes_trigram, rowid, rendered) VALUES ('delete', old.rowid, old.rendered);
            INSERT INTO notes_lexical (notes_lexical, rowid, content, tags, keywords, context)
                VALUES ('delete', old.rowid, old.content, old.tags, old.keywords, old.context);
        END;
        CREATE TRIGGER IF NOT EXISTS notes_au_trigram AFTER UPDATE OF rendered ON notes BEGIN
            INSERT INTO notes_trigram (notes_trigram, rowid, rendered) VALUES ('delete', old.rowid, old.rendered);
            INSERT INTO notes_trigram (rowid, rendered) VALUES (new.rowid, new.rendered);
        END;
        CREATE TRIGGER IF NOT EXISTS notes_au_lexical AFTER UPDATE OF content, tags, keywords, context ON notes BEGIN
            INSERT INTO notes_lexical (notes_lexical, rowid, content, tags, keywords, context)
                VALUES ('delete', old.rowid, old.content, old.tags, old.keywords, old.context);
            INSERT INTO notes_lexical (rowid, content, tags, keywords, context)
                VALUES (new.rowid, new.content, new.tags, new.keywords, new.context);
        END;
        """
    )
    lineage = {**_SCOPE, "entry_id": str, "status": str, "changed_at": str}
    db.table("source_lineage").create(lineage, pk=(*_SCOPE_KEY, "entry_id"), not_null=set(lineage), if_not_exists=True)
    working = {**_SCOPE, "value": str, "version": int}
    db.table("working").create(working, pk=_SCOPE_KEY, not_null=set(working), if_not_exists=True)
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS note_changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id TEXT NOT NULL, resource_id TEXT NOT NULL, thread_id TEXT NOT NULL,
            note_id TEXT NOT NULL, op TEXT NOT NULL
        );
        """
    )
    db.table("note_changes").create_index([*_SCOPE_KEY, "seq"], index_name="note_changes_scope", if_not_exists=True)


def _workspace(db: sqlite_utils.Database) -> None:
    """The workspace's file index: each file's text with a trigram index, and a change counter per space."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS workspace_files (
            rowid INTEGER PRIMARY KEY,
            space TEXT NOT NULL,
            path TEXT NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            text TEXT NOT NULL,
            UNIQUE (space, path)
        );
        CREATE VIRTUAL TABLE IF NOT EXISTS workspace_trigram USING fts5(
            text, content='workspace_files', content_rowid='rowid', tokenize='trigram'
        );
        CREATE TRIGGER IF NOT EXISTS workspace_files_ai AFTER INSERT ON workspace_files BEGIN
            INSERT INTO workspace_trigram(rowid, text) VALUES (new.rowid, new.text);
        END;
        CREATE TRIGGER IF NOT EXISTS workspace_files_ad AFTER DELETE ON workspace_files BEGIN
            INSERT INTO workspace_trigram(workspace_trigram, rowid, text) VALUES ('delete', old.rowid, old.text);
        END;
        """
    )
    db.table("workspace_seq").create({"space": str, "seq": int}, pk="space", not_null={"seq"}, if_not_exists=True)
    db.executescript(
        """
        CREATE TRIGGER IF NOT EXISTS workspace_seq_ai AFTER INSERT ON workspace_files BEGIN
            INSERT INTO workspace_seq(space, seq) VALUES (new.space, 1) ON CONFLICT(space) DO UPDATE SET seq = seq + 1;
        END;
        CREATE TRIGGER IF NOT EXISTS workspace_seq_ad AFTER DELETE ON workspace_files BEGIN
            INSERT INTO workspace_seq(space, seq) VALUES (old.space, 1) ON CONFLICT(space) DO UPDATE SET seq = seq + 1;
        END;
        CREATE TRIGGER IF NOT EXISTS workspace_seq_au AFTER UPDATE ON workspace_files BEGIN
            INSERT INTO workspace_seq(space, seq) VALUES (new.space, 1) ON CONFLICT(space) DO UPDATE SET seq = seq + 1;
        END;
        CREATE TRIGGER IF NOT EXISTS workspace_files_au AFTER UPDATE ON workspace_files BEGIN
            INSERT INTO workspace_trigram(workspace_trigram, rowid, text) VALUES ('delete', old.rowid, old.text);
            INSERT INTO workspace_trigram(rowid, text) VALUES (new.rowid, new.text);
        END;
        """
    )


def _ledger(db: sqlite_utils.Database) -> None:
    """The ledger's sessions and entries, and its contentless full-text index of messages."""
    db.executescript(
        """
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
        CREATE UNIQUE INDEX IF NOT EXISTS ledger_entries_mpos ON ledger_entries(session_key, mpos)
            WHERE mpos IS NOT NULL;
        CREATE INDEX IF NOT EXISTS ledger_entries_ref ON ledger_entries(ref) WHERE ref IS NOT NULL;
        CREATE VIRTUAL TABLE IF NOT EXISTS ledger_fts USING fts5(
            sess, body, content='', tokenize='unicode61 remove_diacritics 2'
        );
        """
    )


def initial_layout(db: sqlite_utils.Database) -> None:
    _auth(db)
    _fabric(db)
    _workspace(db)
    _ledger(db)


_HOLDINGS = ("notes", "working", "workspace_files", "file_versions", "ledger_sessions", "snapshots", "audit")


def holds_anything(conn: sqlite3.Connection) -> bool:
    """True when the store file holds a note, a file, a session, a snapshot or an audited write."""
    tables = {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return any(conn.execute(f"SELECT 1 FROM {name} LIMIT 1").fetchone() for name in _HOLDINGS if name in tables)
