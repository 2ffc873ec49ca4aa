"""The SQLite form of each step of the one step list (:mod:`.steps`; :mod:`.migrations` runs them).

Step 1 is the layout the store had before migrations were recorded, written so that it is a no-op on
such a store (``if_not_exists`` / ``IF NOT EXISTS`` throughout): an existing file is adopted as
version 1, a new one gets every table. Plain tables and indexes are created through sqlite-utils; SQL
is written out only for what its ``create`` cannot say: ``UNIQUE`` table or column constraints,
``AUTOINCREMENT``, a ``REFERENCES`` beside those, FTS5 tables with their options, triggers and
partial indexes.

A later change is a new step appended to :data:`.steps.STEPS` with a form for each engine (say
``db.table("notes").add_column(...)`` here); a step once released is never edited.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite_utils

__all__ = [
    "OAUTH_TABLES",
    "audit_by_space",
    "change_stamps",
    "file_history",
    "holds_anything",
    "initial_layout",
    "notes_by_file_name",
    "oauth",
    "snapshots",
    "trigrams_without_positions",
    "workspace_charged",
    "workspace_of_older_stores",
]

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


def notes_by_file_name(db: sqlite_utils.Database) -> None:
    """Listings of ``/facts`` and ``/procedures`` are ordered by file name (``<name>.md``, which is not
    the order of ``name``: ``a-b.md`` sorts before ``a.md``); an index on that expression lets a page
    be read in order instead of sorting every note of the kind. An expression index is SQL that
    sqlite-utils' ``create_index`` cannot say."""
    db.execute(
        "CREATE INDEX IF NOT EXISTS notes_file_name "
        "ON notes (tenant_id, resource_id, thread_id, kind, (name || '.md')) WHERE name IS NOT NULL"
    )


def trigrams_without_positions(db: sqlite_utils.Database) -> None:
    """The trigram indexes keep which rows hold a trigram, not where (FTS5 ``detail=none``): about a
    quarter of the bytes (300 against 1,040 a note), as fast, and as selective once a literal asks
    for all its overlapping trigrams (:mod:`.trigram`). Rebuilt from the rows they index; the
    triggers that keep them name the tables, not their options, and stay as they are."""
    for table, column, content in (
        ("notes_trigram", "rendered", "notes"),
        ("workspace_trigram", "text", "workspace_files"),
    ):
        db.executescript(
            f"""
            DROP TABLE IF EXISTS {table};
            CREATE VIRTUAL TABLE {table} USING fts5(
                {column}, content='{content}', content_rowid='rowid', tokenize='trigram', detail=none);
            INSERT INTO {table} ({table}) VALUES ('rebuild');
            """
        )


def audit_by_space(db: sqlite_utils.Database) -> None:
    """A space's last write (the time its folders show) is one index lookup, not a scan of every space's rows."""
    db.execute("CREATE INDEX IF NOT EXISTS audit_space_seq ON audit (space, seq)")


def snapshots(db: sqlite_utils.Database) -> None:
    """Named instants of a space (afi snapshot): one row each, the past they name is the notes' own."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS snapshots (space TEXT NOT NULL, name TEXT NOT NULL, at TEXT NOT NULL, "
        "created_at TEXT NOT NULL, PRIMARY KEY (space, name))"
    )


def file_history(db: sqlite_utils.Database) -> None:
    """Workspace file history (afi gc drops the old): each version's bytes once in ``file_blobs``,
    keyed by their SHA-256 however many versions and spaces share them, and ``file_versions``: from
    ``at`` on, ``path`` held the blob ``sha256`` (or was absent, when it is NULL)."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS file_blobs (sha256 TEXT PRIMARY KEY, size INTEGER NOT NULL, data BLOB NOT NULL)"
    )
    db.execute(
        "CREATE TABLE IF NOT EXISTS file_versions (id INTEGER PRIMARY KEY AUTOINCREMENT, space TEXT NOT NULL, "
        "path TEXT NOT NULL, sha256 TEXT, size INTEGER NOT NULL, at TEXT NOT NULL, op TEXT NOT NULL)"
    )
    db.execute("CREATE INDEX IF NOT EXISTS file_versions_path ON file_versions (space, path, at)")
    db.execute("CREATE INDEX IF NOT EXISTS file_versions_at ON file_versions (space, at)")
    db.execute("CREATE INDEX IF NOT EXISTS file_versions_sha256 ON file_versions (sha256) WHERE sha256 IS NOT NULL")


def oauth(db: sqlite_utils.Database) -> None:
    """The built-in OAuth authorization server (afi/auth/oauth): registered clients, the grants the
    owner approved (a client, a space, scopes, the resource bound into its tokens), and every short-lived
    secret by its SHA-256: pending consent requests, authorization codes, access and refresh tokens."""
    for statement in OAUTH_TABLES:
        db.execute(statement)


OAUTH_TABLES = (
    "CREATE TABLE IF NOT EXISTS oauth_clients (client_id TEXT PRIMARY KEY, info TEXT NOT NULL, "
    "created_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS oauth_grants (id TEXT PRIMARY KEY, client_id TEXT NOT NULL, space TEXT NOT NULL, "
    "scopes TEXT NOT NULL, resource TEXT NOT NULL, approved_by TEXT NOT NULL, created_at TEXT NOT NULL, "
    "revoked_at TEXT)",
    "CREATE TABLE IF NOT EXISTS oauth_tokens (sha256 TEXT PRIMARY KEY, kind TEXT NOT NULL, grant_id TEXT, "
    "client_id TEXT NOT NULL, expires_at INTEGER NOT NULL, used_at TEXT, data TEXT NOT NULL, "
    "created_at TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS oauth_tokens_grant ON oauth_tokens (grant_id)",
)


def change_stamps(db: sqlite_utils.Database) -> None:
    """Each note change carries a stamp that never goes back: the newest is the scope's clock (one lookup)."""
    if "stamp" not in db["note_changes"].columns_dict:
        db.execute("ALTER TABLE note_changes ADD COLUMN stamp TEXT")


_HOLDINGS = ("notes", "working", "workspace_files", "file_versions", "ledger_sessions", "snapshots", "audit")


def holds_anything(conn: sqlite3.Connection) -> bool:
    """True when the store file holds a note, a file, a session, a snapshot or an audited write."""
    tables = {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return any(conn.execute(f"SELECT 1 FROM {name} LIMIT 1").fetchone() for name in _HOLDINGS if name in tables)


def workspace_of_older_stores(db: sqlite_utils.Database) -> None:
    """A store that already holds something used the per-user workspace (``<data dir>/files``) whatever
    its path: record that, so the default of a new store (a folder beside it) never hides its files."""
    if holds_anything(db.conn):
        db.execute("INSERT INTO meta (key, value) VALUES ('workspace_root', 'per-user') ON CONFLICT (key) DO NOTHING")


def workspace_charged(db: sqlite_utils.Database) -> None:
    """What the quota charges each workspace file: the bytes it has on disk, at most its size (a hole
    costs nothing). NULL until the file is next indexed; the quota charges such a file its size."""
    if "charged" not in db["workspace_files"].columns_dict:
        db.execute("ALTER TABLE workspace_files ADD COLUMN charged INTEGER")


SYNC_PEERS = (
    "CREATE TABLE IF NOT EXISTS sync_peers (space TEXT NOT NULL, peer TEXT NOT NULL, label TEXT NOT NULL, "
    "received INTEGER NOT NULL, received_files INTEGER NOT NULL DEFAULT 0, synced_at TEXT NOT NULL, "
    "PRIMARY KEY (space, peer))"
)


def sync(db: sqlite_utils.Database) -> None:
    """What syncing with other stores needs: where each note change and file version came from (NULL:
    written here), the changes of one note by its id (a forget stays a ``delete`` change, so a synced
    copy is not taken back), and per space and peer store how far this store has applied that peer's
    note changes and file versions."""
    if "origin" not in db["note_changes"].columns_dict:
        db.execute("ALTER TABLE note_changes ADD COLUMN origin TEXT")
    if "origin" not in db["file_versions"].columns_dict:
        db.execute("ALTER TABLE file_versions ADD COLUMN origin TEXT")
    db.execute(
        "CREATE INDEX IF NOT EXISTS note_changes_note ON note_changes (tenant_id, resource_id, thread_id, note_id)"
    )
    db.execute(SYNC_PEERS)


SNAPSHOT_DROPS = (
    "CREATE TABLE IF NOT EXISTS snapshot_drops (space TEXT NOT NULL, name TEXT NOT NULL, at TEXT NOT NULL, "
    "created_at TEXT NOT NULL, dropped_at TEXT NOT NULL, PRIMARY KEY (space, name, at, created_at))"
)


def sync_ledger(db: sqlite_utils.Database) -> None:
    """What syncing the rest of a space needs: each ledger entry's place in its session's merged order
    (``clock``: a local append gets the session's highest plus one, an entry from a peer keeps its own,
    and a session reads in (clock, entry id) order), where an entry came from, how far each peer's
    ledger is applied, and the snapshots deleted (so a peer's copy is not brought back)."""
    columns = db["ledger_entries"].columns_dict
    if "clock" not in columns:
        db.execute("ALTER TABLE ledger_entries ADD COLUMN clock INTEGER")
        db.execute("UPDATE ledger_entries SET clock = pos + 1")
    if "origin" not in columns:
        db.execute("ALTER TABLE ledger_entries ADD COLUMN origin TEXT")
    if "received_ledger" not in db["sync_peers"].columns_dict:
        db.execute("ALTER TABLE sync_peers ADD COLUMN received_ledger INTEGER NOT NULL DEFAULT 0")
    db.execute(SNAPSHOT_DROPS)


def workspace_folders(db: sqlite_utils.Database) -> None:
    """Each workspace folder's last ``mkdir`` or ``rmdir`` (a delete or a move of it counts), so a
    sync can make and remove empty folders on the other side."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS folder_ops (space TEXT NOT NULL, path TEXT NOT NULL, op TEXT NOT NULL, "
        "at TEXT NOT NULL, PRIMARY KEY (space, path))"
    )


VECTOR_FILLS = (
    "CREATE TABLE IF NOT EXISTS vector_fills (fill INTEGER PRIMARY KEY AUTOINCREMENT, tenant_id TEXT NOT NULL, "
    "resource_id TEXT NOT NULL, thread_id TEXT NOT NULL, note_id TEXT NOT NULL)"
)


def vectors_after_writes(db: sqlite_utils.Database) -> None:
    """Notes written before their vectors: the rows still without one found by an index of just those,
    and each vector filled in later logged, so a process holding a scope's vectors in memory reads
    the rows filled since it last looked."""
    db.execute(
        "CREATE INDEX IF NOT EXISTS notes_without_vectors ON notes (tenant_id, resource_id, thread_id) "
        "WHERE embedding IS NULL"
    )
    db.execute(VECTOR_FILLS)
