"""The tests' own PostgreSQL: pgvector and pg_trgm work in it, and a killed test run leaves no server behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector

from tests.support.postgres import BASE, sweep_orphans


def test_vector_and_trigram_indexes_answer_queries(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        register_vector(conn)
        conn.execute("DROP TABLE IF EXISTS harness")
        conn.execute("CREATE TABLE harness (id int PRIMARY KEY, body text NOT NULL, embedding vector(3) NOT NULL)")
        rows = [(i, f"note {i} about {'canary' if i % 50 == 0 else 'fleet'} deploys", [1.0, i / 100, 0.0])
                for i in range(1, 501)]  # fmt: skip
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO harness VALUES (%s, %s, %s::vector)", rows)
        conn.execute("CREATE INDEX harness_hnsw ON harness USING hnsw (embedding vector_cosine_ops)")
        conn.execute("CREATE INDEX harness_trgm ON harness USING gin (body gin_trgm_ops)")
        conn.execute("ANALYZE harness")
        conn.execute("SET enable_seqscan = off")
        plan = " ".join(row[0] for row in conn.execute("EXPLAIN SELECT id FROM harness WHERE body ILIKE '%canary%'"))
        assert "harness_trgm" in plan, plan
        found = [r[0] for r in conn.execute("SELECT id FROM harness WHERE body ~ 'c[a-z]nary' ORDER BY id")]
        assert found == list(range(50, 501, 50))
        plan = " ".join(
            row[0] for row in conn.execute("EXPLAIN SELECT id FROM harness ORDER BY embedding <=> '[0,1,0]' LIMIT 3")
        )
        assert "harness_hnsw" in plan, plan
        nearest = conn.execute("SELECT id FROM harness ORDER BY embedding <=> '[1,5,0]' LIMIT 1").fetchone()
        assert nearest is not None and nearest[0] == 500  # the most "upward" vector is the last one


_HOLDER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.support.postgres import postgres_server
with postgres_server() as url:
    print(url, flush=True)
    time.sleep(600)
"""


def test_a_killed_test_process_leaves_no_server_behind() -> None:
    root = str(Path(__file__).resolve().parents[3])
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER.format(root=root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        url = holder.stdout.readline().strip()
        assert url.startswith("postgresql://"), url
        data = Path(url.rsplit("host=", 1)[1])
        server = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        time.sleep(0.2)
        os.kill(server, 0)  # still running: nobody stopped it
        assert sweep_orphans() >= 1
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(server, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"the orphaned server {server} is still running after the sweep")
        assert not data.parent.exists()
        assert BASE.is_dir()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        if holder.stdout is not None:
            holder.stdout.close()
