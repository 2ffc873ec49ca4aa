"""The SQLite form of each step after the first (:mod:`.steps`; step 1, the initial layout, is
:mod:`.schema`'s). A step once released is never edited; a new one is appended here and to the list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .schema import holds_anything

if TYPE_CHECKING:
    import sqlite_utils

__all__ = [
    "OAUTH_TABLES",
    "SNAPSHOT_DROPS",
    "SYNC_PEERS",
    "VECTOR_FILLS",
    "audit_by_space",
    "change_stamps",
    "file_history",
    "fold_bags",
    "fold_bands",
    "notes_by_file_name",
    "oauth",
    "snapshots",
    "sync",
    "sync_ledger",
    "trigrams_without_positions",
    "vectors_after_writes",
    "workspace_charged",
    "workspace_folders",
    "workspace_of_older_stores",
]


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


def fold_bands(db: sqlite_utils.Database) -> None:
    """Consolidation's near-duplicate candidates: each note's SimHash bands, keyed by (scope, band and
    key in one code), and each scope's centre the signs are taken around with the highest rowid still
    to band. The fabric writes them with the notes and bands a store's older rows a chunk a write
    (``providers/memory/fabric/band_rows.py``)."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS note_bands (
            scope INTEGER NOT NULL, code INTEGER NOT NULL, note_rowid INTEGER NOT NULL,
            PRIMARY KEY (scope, code, note_rowid)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS note_band_centres (
            scope INTEGER PRIMARY KEY, centre BLOB NOT NULL, unbanded_upto INTEGER NOT NULL
        );
        """
    )


def fold_bags(db: sqlite_utils.Database) -> None:
    """Each banded note's bag of words, kept compact by its rowid, so the fold scores a band's candidates
    without reading and tokenizing their texts; every scope with bands is marked to band again from its
    newest row (its bags come with its bands, a chunk a write: ``providers/memory/fabric/band_rows.py``)."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS note_bags (note_rowid INTEGER PRIMARY KEY, bag BLOB NOT NULL);
        UPDATE note_band_centres SET unbanded_upto = (SELECT COALESCE(MAX(rowid), 0) FROM notes);
        """
    )
