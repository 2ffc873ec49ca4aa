"""The embedder as a user meets it: a new store reads meaning, an old one keeps its own, a mismatch is
refused naming both, ``afi db reembed`` moves a store over, and ``afi doctor`` says which is in use.

These run the real model (all-MiniLM-L6-v2, int8 ONNX) on a handful of notes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import httpx

from tests.support import warm
from tests.support.servers import start_afi_serve
from tests.support.warm import AFI

CAR = "I drive a red Toyota to work every morning"
BUDGET = "The quarterly budget review is on Thursday"
QUESTION = "what vehicle do I own"  # shares no word with CAR: grep and BM25 cannot find it
MINILM = "minilm-l6-v2-int8"


def _afi(*args: str, db: Path, embedder: str | None) -> subprocess.CompletedProcess[str]:
    """Run ``afi`` on ``db`` with ``AFI_EMBEDDER`` set to ``embedder``, or unset (None), as a user has it."""
    environ = {k: v for k, v in os.environ.items() if k not in ("AFI_EMBEDDER", "AFI_SPACE")}
    environ |= {"AFI_DB": str(db), "AFI_ROOT": str(db.parent / "files"), "COLUMNS": "200"}
    if embedder is not None:
        environ["AFI_EMBEDDER"] = embedder
    return warm.run([str(AFI), *args], capture_output=True, text=True, env=environ, timeout=120, check=False)


def _remember(db: Path, embedder: str | None) -> None:
    for content in (CAR, BUDGET):
        done = _afi("remember", "fact", content, db=db, embedder=embedder)
        assert done.returncode == 0, done.stderr


def _recalled(db: Path, embedder: str | None) -> list[str]:
    done = _afi("recall", QUESTION, "--json", db=db, embedder=embedder)
    assert done.returncode == 0, done.stderr
    return [hit["content"] for hit in json.loads(done.stdout)["hits"]]


def _doctor(db: Path, embedder: str | None, *args: str) -> tuple[int, dict[str, dict[str, str]]]:
    done = _afi("doctor", "--json", *args, db=db, embedder=embedder)
    return done.returncode, {check["name"]: check for check in json.loads(done.stdout)}


def test_a_new_store_reads_meaning_and_the_doctor_names_its_embedder(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    _remember(db, None)
    # each `afi remember` made its note's vector after the write, before the process ended
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*), COUNT(embedding) FROM notes").fetchone() == (2, 2)
    assert _recalled(db, None)[0] == CAR
    code, checks = _doctor(db, None)
    assert code == 0, checks
    assert checks["embedder"]["status"] == "ok" and MINILM in checks["embedder"]["detail"]
    assert checks["embeds"]["status"] == "ok" and "384 dims" in checks["embeds"]["detail"]
    assert "SHA-256 checked" in checks["embeds"]["detail"]


def test_an_old_hash_store_keeps_its_embedder_refuses_another_and_moves_over(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    _remember(db, "hash")
    assert CAR not in _recalled(db, None)  # words only: the question shares none with the note
    code, checks = _doctor(db, None)
    assert code == 0 and "hash-fnv1a-384" in checks["embedder"]["detail"], checks

    refused = _afi("recall", QUESTION, db=db, embedder="minilm")
    assert refused.returncode == 2
    assert "'hash-fnv1a-384'" in refused.stderr and f"'{MINILM}'" in refused.stderr, refused.stderr
    assert "afi db reembed --embedder minilm`" in refused.stderr, refused.stderr
    code, checks = _doctor(db, None, "--embedder", "minilm")
    assert code == 1 and checks["embedder"]["status"] == "problem", checks
    assert "afi db reembed --embedder minilm" in checks["embedder"]["detail"]

    moved = _afi("db", "reembed", "--embedder", "minilm", db=db, embedder=None)
    assert moved.returncode == 0, moved.stderr
    assert f"2 notes re-embedded, 'hash-fnv1a-384' (384 dims) -> '{MINILM}' (384 dims)" in moved.stdout
    assert _recalled(db, None)[0] == CAR
    assert _recalled(db, "minilm")[0] == CAR
    assert _afi("recall", QUESTION, db=db, embedder="hash").returncode == 2  # and now hash is the other one


def test_serve_refuses_at_start_an_embedder_the_store_was_not_made_with(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    _remember(db, "hash")
    refused = _afi("serve", "--port", "0", "--embedder", "minilm", db=db, embedder=None)
    assert refused.returncode == 2, refused.stdout
    assert "'hash-fnv1a-384'" in refused.stderr and "listening" not in refused.stdout, refused.stderr
    unknown = _afi("serve", "--port", "0", "--embedder", "word2vec", db=db, embedder=None)
    assert unknown.returncode == 2 and "'word2vec' is not an embedder" in unknown.stderr, unknown.stderr


def test_serve_names_the_model_in_its_manifest_and_searches_by_meaning(tmp_path: Path) -> None:
    db, root = tmp_path / "afi.db", tmp_path / "files"
    with start_afi_serve(db, root, "--embedder", "minilm") as server:
        for name, content in (("car", CAR), ("budget", BUDGET)):
            put = httpx.put(
                server.url + "/afi/write", params={"path": f"/facts/{name}.md"}, content=content, timeout=30
            )
            assert put.status_code == 200, put.text
        manifest = httpx.get(server.url + "/.afi/manifest.json").json()
        assert manifest["x-embedder"] == {"name": MINILM, "dims": 384}
        found = httpx.post(server.url + "/afi/search", json={"query": {"semantic": QUESTION}}, timeout=30)
        assert found.status_code == 200, found.text
        assert found.json()["matches"][0]["path"] == "/facts/car.md", found.json()
