"""The store's one schema: numbered migrations on real SQLite files, and ``afi db status|migrate``."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from afi.auth.audit import AuditLog
from afi.auth.keys import LOCAL_OWNER, KeyStore
from afi.errors import Unsupported
from afi.providers.memory import Scope, Store
from afi.providers.memory.provider import MemoryProvider
from afi.storage import LATEST, STEPS, Step, applied_steps, ensure_schema, file_version, migrate, schema_status
from afi.storage import ensure as ensure_module
from afi.storage.database import open_database
from afi.storage.migrations import run_steps
from afi.storage.trigram import trigram_query
from tests.support.cli import afi

# The layout as the modules created it before migrations were recorded: executed by hand, as they did.
OLD_LAYOUT = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, principal TEXT NOT NULL, space TEXT NOT NULL,
    verb TEXT NOT NULL, path TEXT NOT NULL, result TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS workspace_files (
    rowid INTEGER PRIMARY KEY, space TEXT NOT NULL, path TEXT NOT NULL, size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL, text TEXT NOT NULL, UNIQUE (space, path)
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
CREATE TABLE IF NOT EXISTS workspace_seq (space TEXT PRIMARY KEY, seq INTEGER NOT NULL);
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
CREATE TABLE IF NOT EXISTS afi_keys (
    id TEXT PRIMARY KEY, name TEXT, space TEXT NOT NULL, scopes TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL, revoked_at TEXT
);
CREATE TABLE IF NOT EXISTS afi_ssh_keys (
    id TEXT PRIMARY KEY, name TEXT, fingerprint TEXT NOT NULL UNIQUE, public_key TEXT NOT NULL,
    space TEXT, scopes TEXT, api_key TEXT, created_at TEXT NOT NULL, revoked_at TEXT
);
CREATE TABLE IF NOT EXISTS afi_receipts (
    principal TEXT NOT NULL, space TEXT NOT NULL, tool TEXT NOT NULL, key TEXT NOT NULL,
    args_sha256 TEXT NOT NULL, execution_id TEXT NOT NULL, status TEXT NOT NULL, result TEXT,
    started_at REAL NOT NULL, completed_at REAL, PRIMARY KEY (principal, space, tool, key)
);
CREATE INDEX IF NOT EXISTS afi_receipts_started ON afi_receipts(started_at);
CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE notes (
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
CREATE INDEX notes_kind_name ON notes (tenant_id, resource_id, thread_id, kind, name);
CREATE INDEX notes_path ON notes (tenant_id, resource_id, thread_id, path) WHERE path IS NOT NULL;
CREATE VIRTUAL TABLE notes_trigram USING fts5(
    rendered, content='notes', content_rowid='rowid', tokenize='trigram');
CREATE VIRTUAL TABLE notes_lexical USING fts5(
    content, tags, keywords, context, content='notes', content_rowid='rowid', tokenize='porter unicode61');
CREATE TRIGGER notes_ai AFTER INSERT ON notes BEGIN
    INSERT INTO notes_trigram (rowid, rendered) VALUES (new.rowid, new.rendered);
    INSERT INTO notes_lexical (rowid, content, tags, keywords, context)
        VALUES (new.rowid, new.content, new.tags, new.keywords, new.context);
END;
CREATE TRIGGER notes_ad AFTER DELETE ON notes BEGIN
    INSERT INTO notes_trigram (notes_trigram, rowid, rendered) VALUES ('delete', old.rowid, old.rendered);
    INSERT INTO notes_lexical (notes_lexical, rowid, content, tags, keywords, context)
        VALUES ('delete', old.rowid, old.content, old.tags, old.keywords, old.context);
END;
CREATE TRIGGER notes_au_trigram AFTER UPDATE OF rendered ON notes BEGIN
    INSERT INTO notes_trigram (notes_trigram, rowid, rendered) VALUES ('delete', old.rowid, old.rendered);
    INSERT INTO notes_trigram (rowid, rendered) VALUES (new.rowid, new.rendered);
END;
CREATE TRIGGER notes_au_lexical AFTER UPDATE OF content, tags, keywords, context ON notes BEGIN
    INSERT INTO notes_lexical (notes_lexical, rowid, content, tags, keywords, context)
        VALUES ('delete', old.rowid, old.content, old.tags, old.keywords, old.context);
    INSERT INTO notes_lexical (rowid, content, tags, keywords, context)
        VALUES (new.rowid, new.content, new.tags, new.keywords, new.context);
END;
CREATE TABLE source_lineage (
    tenant_id TEXT NOT NULL, resource_id TEXT NOT NULL, thread_id TEXT NOT NULL,
    entry_id TEXT NOT NULL, status TEXT NOT NULL, changed_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, resource_id, thread_id, entry_id)
);
CREATE TABLE working (
    tenant_id TEXT NOT NULL, resource_id TEXT NOT NULL, thread_id TEXT NOT NULL,
    value TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, resource_id, thread_id)
);
CREATE TABLE note_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id TEXT NOT NULL, resource_id TEXT NOT NULL, thread_id TEXT NOT NULL,
    note_id TEXT NOT NULL, op TEXT NOT NULL
);
CREATE INDEX note_changes_scope ON note_changes (tenant_id, resource_id, thread_id, seq);
INSERT INTO schema_migrations VALUES (1, '2026-01-01T00:00:00Z');
CREATE TABLE IF NOT EXISTS ledger_sessions (
    key INTEGER PRIMARY KEY AUTOINCREMENT, space TEXT NOT NULL, session_id TEXT NOT NULL,
    created_at TEXT NOT NULL, UNIQUE(space, session_id)
);
CREATE TABLE IF NOT EXISTS ledger_entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key INTEGER NOT NULL REFERENCES ledger_sessions(key),
    pos INTEGER NOT NULL, mpos INTEGER, entry_id TEXT NOT NULL, type TEXT NOT NULL, role TEXT,
    text TEXT NOT NULL DEFAULT '', timestamp TEXT NOT NULL, ref TEXT, data TEXT NOT NULL DEFAULT '{}',
    UNIQUE(session_key, entry_id), UNIQUE(session_key, pos)
);
CREATE UNIQUE INDEX IF NOT EXISTS ledger_entries_mpos ON ledger_entries(session_key, mpos) WHERE mpos IS NOT NULL;
CREATE INDEX IF NOT EXISTS ledger_entries_ref ON ledger_entries(ref) WHERE ref IS NOT NULL;
CREATE VIRTUAL TABLE IF NOT EXISTS ledger_fts USING fts5(
    sess, body, content='', tokenize='unicode61 remove_diacritics 2'
);
"""

OLD_ROWS = """
INSERT INTO meta VALUES ('embedder', 'hash-fnv1a-384'), ('dims', '384');
INSERT INTO note_changes (tenant_id, resource_id, thread_id, note_id, op)
    VALUES ('t', 'r', 'main', 'aaaaaaaaaaaa', 'upsert');
INSERT INTO notes (tenant_id, resource_id, thread_id, id, kind, name, content, ingested_at, created_at,
    token_count, seq, rendered)
    VALUES ('t', 'r', 'main', 'aaaaaaaaaaaa', 'fact', 'canary', 'the canary deploy', '2026-01-01T00:00:00Z',
    '2026-01-01T00:00:00Z', 4, 1, 'the canary deploy');
INSERT INTO workspace_files (space, path, size, mtime_ns, text) VALUES ('default', 'a.txt', 5, 1, 'hello');
INSERT INTO audit (at, principal, space, verb, path, result) VALUES ('2026-01-01T00:00:00Z', 'local', 'default',
    'write', '/files/a.txt', 'ok');
INSERT INTO afi_keys VALUES ('key_1', 'reader', 'default', 'afi:read', 'abc', '2026-01-01T00:00:00Z', NULL);
INSERT INTO ledger_sessions (space, session_id, created_at) VALUES ('default', 's1', '2026-01-01T00:00:00Z');
"""

BOOKKEEPING = ("schema_version", "schema_migrations")


def _old_store(path: Path, *, rows: bool = True) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(OLD_LAYOUT + (OLD_ROWS if rows else ""))
    conn.close()
    return path


def _open(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def _layout(conn: sqlite3.Connection) -> dict[str, Any]:
    """Every object of the file but the migration bookkeeping: its SQL with quoting, spacing and
    IF NOT EXISTS ignored, and for tables what SQLite reports of their columns, indexes and keys."""
    found: dict[str, Any] = {}
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall()
    for kind, name, table, sql in rows:
        if table in BOOKKEEPING:
            continue
        text = None if sql is None else re.sub(r"\s*([(),;])\s*", r"\1", " ".join(sql.replace('"', "").split()))
        described: list[Any] = [kind, table, None if text is None else text.replace("IF NOT EXISTS ", "")]
        if kind == "table":
            described.append(conn.execute(f"PRAGMA table_xinfo('{name}')").fetchall())
            described.append(conn.execute(f"PRAGMA foreign_key_list('{name}')").fetchall())
            indexes = conn.execute(f"PRAGMA index_list('{name}')").fetchall()
            described.append(
                sorted((i[1], i[2:], conn.execute(f"PRAGMA index_xinfo('{i[1]}')").fetchall()) for i in indexes)
            )
        found[name] = described
    return found


def _without(layout: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """The layout less the named objects, also taken out of their tables' index lists."""
    kept: dict[str, Any] = {}
    for name, described in layout.items():
        if name in names:
            continue
        if described[0] == "table":
            described = [*described[:-1], [index for index in described[-1] if index[0] not in names]]
        kept[name] = described
    return kept


def test_fresh_store_gets_every_table_at_the_latest_version(tmp_path: Path) -> None:
    conn = _open(tmp_path / "afi.db")
    done = migrate(conn)
    assert [step.number for step in done] == list(range(1, LATEST + 1))
    assert file_version(conn) == LATEST == len(STEPS)
    assert [(s.number, s.name) for s in applied_steps(conn)] == [(s.number, s.name) for s in STEPS]
    tables = set(sqlite_utils.Database(conn).table_names())
    for name in ("notes", "notes_trigram", "audit", "afi_keys", "afi_ssh_keys", "afi_receipts", "workspace_files",
                 "workspace_seq", "ledger_entries", "ledger_fts", "meta", "working", "schema_version"):  # fmt: skip
        assert name in tables
    assert migrate(conn) == []


def test_step_one_equals_the_old_ddl(tmp_path: Path) -> None:
    old = _open(_old_store(tmp_path / "old.db", rows=False))
    new = _open(tmp_path / "new.db")
    run_steps(new, STEPS[:1], where="test")
    assert _layout(new) == _layout(old)


REBUILT = ("notes_trigram", "workspace_trigram")  # step 3: the same tables, without positions
# steps 10, 13, 14 and 15: ALTER TABLE … ADD COLUMN
ADDED_COLUMNS = [
    ("note_changes", "stamp", "TEXT"),
    ("workspace_files", "charged", "INTEGER"),
    ("note_changes", "origin", "TEXT"),
    ("ledger_entries", "clock", "INTEGER"),
    ("ledger_entries", "origin", "TEXT"),
]


def _less_added_columns(layout: dict[str, Any]) -> dict[str, Any]:
    """The layout with the columns later steps added taken out again (each asserted to be there)."""
    out = dict(layout)
    for table, column, kind_of in ADDED_COLUMNS:
        kind, name, sql, columns, *rest = out[table]
        added = f",{column} {kind_of}"
        assert added in sql and any(c[1] == column for c in columns), (table, column)
        out[table] = [kind, name, sql.replace(added, ""), [c for c in columns if c[1] != column], *rest]
    return out


def _rebuilt(name: str) -> bool:
    return name.startswith(REBUILT)


def test_later_steps_change_only_what_they_name(tmp_path: Path) -> None:
    first = _open(tmp_path / "first.db")
    run_steps(first, STEPS[:1], where="test")
    latest = _open(tmp_path / "latest.db")
    migrate(latest)
    before, after = _layout(first), _less_added_columns(_layout(latest))
    added = set(after) - set(before)
    assert added == {"notes_file_name", "audit_space_seq", "snapshots", "sqlite_autoindex_snapshots_1",
                     "file_blobs", "sqlite_autoindex_file_blobs_1", "file_versions", "file_versions_path",
                     "file_versions_at", "file_versions_sha256", "oauth_clients", "sqlite_autoindex_oauth_clients_1",
                     "oauth_grants", "sqlite_autoindex_oauth_grants_1", "oauth_tokens",
                     "sqlite_autoindex_oauth_tokens_1", "oauth_tokens_grant", "note_changes_note", "sync_peers",
                     "sqlite_autoindex_sync_peers_1", "snapshot_drops",
                     "sqlite_autoindex_snapshot_drops_1", "folder_ops", "sqlite_autoindex_folder_ops_1",
                     "notes_without_vectors", "vector_fills", "note_bands", "note_band_centres",
                     "note_bags"}  # fmt: skip
    kept = _without(after, added)
    changed = {name for name in before if kept.get(name) != before[name]}
    assert {"notes_trigram", "workspace_trigram"} <= changed and all(_rebuilt(name) for name in changed), changed
    for table in REBUILT:
        assert "detail=none" in after[table][2]
    assert _without(kept, changed) == _without(before, changed)


def test_listings_read_the_file_name_index_in_order(tmp_path: Path) -> None:
    conn = _open(tmp_path / "afi.db")
    migrate(conn)
    plan = conn.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM notes WHERE tenant_id = 't' AND resource_id = 'r' AND thread_id = 'h' "
        "AND kind = 'fact' AND name IS NOT NULL AND name || '.md' > 'a.md' ORDER BY name || '.md' LIMIT 100"
    ).fetchall()
    details = " | ".join(row[3] for row in plan)
    assert "notes_file_name" in details and "TEMP B-TREE" not in details, details


def test_old_store_is_adopted_without_data_loss(tmp_path: Path) -> None:
    path = _old_store(tmp_path / "afi.db")
    conn = _open(path)
    before = {name: conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in ("notes", "audit")}
    layout = _layout(conn)
    assert file_version(conn) == 0
    assert [step.number for step in migrate(conn)] == list(range(1, LATEST + 1))
    # step 1 found every table and left it as it was; later steps only added their own objects and
    # rebuilt the trigram indexes (which still find the old rows: below)
    rebuilt = {name for name in layout if _rebuilt(name)}
    migrated = _less_added_columns(_layout(conn))
    assert _without(migrated, (set(migrated) - set(layout)) | rebuilt) == _without(layout, rebuilt)
    assert {n: conn.execute(f"SELECT count(*) FROM {n}").fetchone()[0] for n in before} == before
    hit = conn.execute("SELECT rowid FROM notes_trigram WHERE notes_trigram MATCH ?", (trigram_query(["canary"]),))
    assert hit.fetchall() == [(1,)]
    hit = conn.execute("SELECT rowid FROM workspace_trigram WHERE workspace_trigram MATCH ?", (trigram_query(["ell"]),))
    assert hit.fetchall() == [(1,)]
    conn.close()
    store = Store(path, embedder_name="hash-fnv1a-384", dims=384)
    assert [n.content for n in store.select_notes(Scope(tenant_id="t", resource_id="r", thread_id="main"))] == [
        "the canary deploy"
    ]
    assert store.migrations == list(range(1, LATEST + 1))
    store.close()
    assert [k.id for k in KeyStore(path).list()] == ["key_1"]
    assert AuditLog(open_database(path)).recent()[0]["path"] == "/files/a.txt"


def test_partial_old_store_gets_the_missing_tables(tmp_path: Path) -> None:
    path = tmp_path / "afi.db"
    with sqlite3.connect(path) as conn:  # what `afi token create` alone left behind
        found = re.search(r"CREATE TABLE IF NOT EXISTS afi_keys \(.*?\);", OLD_LAYOUT, re.DOTALL)
        assert found is not None
        conn.execute(found.group(0))
        conn.execute("INSERT INTO afi_keys VALUES ('key_1', NULL, 'default', 'afi:read', 'x', 'now', NULL)")
    conn.close()
    provider = MemoryProvider(path, tmp_path / "files")
    provider.write(LOCAL_OWNER, "/files/a.txt", b"hello")
    assert [k.id for k in KeyStore(path).list()] == ["key_1"]
    assert file_version(_open(path)) == LATEST


def _step_two(db: sqlite_utils.Database) -> None:
    db.table("meta").transform(rename={"value": "text"})
    db.table("working").add_column("note", str)


def test_a_later_step_is_applied_once_and_recorded(tmp_path: Path) -> None:
    conn = _open(tmp_path / "afi.db")
    migrate(conn)
    conn.execute("INSERT INTO meta VALUES ('embedder', 'e')")
    steps = (*STEPS, Step(LATEST + 1, "rename meta value", _step_two))
    done = run_steps(conn, steps, where="test")
    assert [(s.number, s.name) for s in done] == [(LATEST + 1, "rename meta value")]
    assert run_steps(conn, steps, where="test") == []
    assert [s.number for s in applied_steps(conn)] == [*range(1, LATEST + 2)]
    assert conn.execute("SELECT key, text FROM meta").fetchall() == [("embedder", "e")]
    assert "note" in sqlite_utils.Database(conn).table("working").columns_dict


def test_a_failing_step_changes_nothing(tmp_path: Path) -> None:
    conn = _open(tmp_path / "afi.db")
    migrate(conn)

    def half_done(db: sqlite_utils.Database) -> None:
        db.table("working").add_column("note", str)
        raise RuntimeError("half-way")

    with pytest.raises(RuntimeError, match="half-way"):
        run_steps(conn, (*STEPS, Step(LATEST + 1, "broken", half_done)), where="test")
    assert not conn.in_transaction
    assert file_version(conn) == LATEST
    assert "note" not in sqlite_utils.Database(conn).table("working").columns_dict


def test_steps_must_be_numbered_in_order(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="numbered 1, 2"):
        run_steps(_open(tmp_path / "afi.db"), (STEPS[0], Step(3, "gap", _step_two)), where="test")


def _from_the_future(tmp_path: Path) -> Path:
    made = tmp_path / "made.db"
    conn = _open(made)
    migrate(conn)
    conn.execute("INSERT INTO schema_version VALUES (?, 'from a newer afi', 'later')", (LATEST + 6,))
    conn.close()
    future = tmp_path / "future.db"  # another path: this process remembers made.db as up to date
    shutil.copy(made, future)
    return future


def test_newer_store_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    future = _from_the_future(tmp_path)
    message = rf"schema version {LATEST + 6}, but this afi knows versions up to {LATEST} only.*upgrade afi-memory"
    with pytest.raises(Unsupported, match=message):
        KeyStore(future)
    with pytest.raises(Unsupported, match=message):
        migrate(_open(future))
    assert [s.number for s in applied_steps(_open(future))] == [*range(1, LATEST + 1), LATEST + 6]


def test_ensure_schema_runs_once_per_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = ensure_module.run_steps

    def counted(conn: sqlite3.Connection, steps: Any, *, where: str) -> Any:
        calls.append(where)
        return real(conn, steps, where=where)

    monkeypatch.setattr(ensure_module, "run_steps", counted)
    path = tmp_path / "afi.db"
    for _ in range(3):
        ensure_schema(_open(path))
    KeyStore(path).count()
    assert len(calls) == 1


def test_concurrent_first_opens_apply_each_step_once(tmp_path: Path) -> None:
    path = tmp_path / "afi.db"
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            conn = _open(path)
            conn.execute("PRAGMA busy_timeout = 10000")
            migrate(conn)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [s.number for s in applied_steps(_open(path))] == list(range(1, LATEST + 1))


def test_status_reports_version_tables_and_counts(tmp_path: Path) -> None:
    path = _old_store(tmp_path / "afi.db")
    before = schema_status(path)
    assert (before.version, before.pending) == (0, [(s.number, s.name) for s in STEPS])
    run = afi("db", "status", db=path)
    assert run.returncode == 0, run.stderr
    assert "schema version: 0" in run.stdout
    assert "pending: 1 initial layout" in run.stdout
    assert re.search(r"notes\s+│\s+table\s+│\s+1", run.stdout)
    assert re.search(r"notes_trigram\s+│\s+FTS5", run.stdout)
    assert "notes_trigram_data" not in run.stdout

    migrated = afi("db", "migrate", db=path)
    assert migrated.returncode == 0, migrated.stderr
    assert "applied step 1: initial layout" in migrated.stdout
    again = afi("db", "migrate", db=path)
    assert again.returncode == 0, again.stderr
    assert f"already at schema version {LATEST}; nothing to do" in again.stdout

    shown = json.loads(afi("db", "status", "--json", db=path).stdout)
    assert (shown["version"], shown["latest"], shown["pending"]) == (LATEST, LATEST, [])
    counts = {table["name"]: table["rows"] for table in shown["tables"]}
    assert counts["notes"] == counts["audit"] == counts["workspace_files"] == 1
    assert counts["schema_version"] == LATEST
    assert shown["root"] == str(tmp_path / "files")


def test_status_of_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "none" / "afi.db"
    run = afi("db", "status", db=path)
    assert run.returncode == 0, run.stderr
    assert "not created yet" in run.stdout
    assert not path.parent.exists()


def test_cli_refuses_a_newer_store(tmp_path: Path) -> None:
    future = _from_the_future(tmp_path)
    run = afi("db", "migrate", db=future)
    assert run.returncode != 0
    said = " ".join(run.stderr.split())  # the console folds long lines
    assert said.startswith("afi: unsupported: the store ") and "upgrade afi-memory to open it" in said
    shown = afi("db", "status", db=future)
    assert shown.returncode == 0, shown.stderr
    assert "newer than this afi" in shown.stdout
