"""``afi doctor`` says how many notes of a store wait for their vectors (a sentence embedder's are made
after the write), read without opening or migrating the store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from afi.app.doctor import run_checks
from afi.providers.memory import OnnxMiniLM, create_memory, create_memory_fabric
from afi.providers.memory.fabric.choice import EmbedderChoice


def test_the_doctor_says_how_many_notes_wait_for_their_vectors(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    memory = create_memory(db, tenant_id="afi", resource_id="default", thread_id="main", embedder=OnnxMiniLM())
    fabric = create_memory_fabric(memory)
    fabric.remember(kind="fact", content="I drive a red Toyota to work every morning")
    fabric.remember(kind="fact", content="The quarterly budget review is on Thursday")
    memory.close()  # the vectors its writes left are made before it closes

    whole = {check.name: check for check in run_checks(db, tmp_path / "files", EmbedderChoice())}
    assert whole["embedder"].status == "ok" and "wait" not in whole["embedder"].detail, whole["embedder"]

    with sqlite3.connect(db) as conn:  # what a writer killed before making its vectors leaves
        conn.execute("UPDATE notes SET embedding = NULL")
    waiting = {check.name: check for check in run_checks(db, tmp_path / "files", EmbedderChoice())}

    assert waiting["embedder"].status == "ok"
    assert "2 notes wait for their vectors" in waiting["embedder"].detail, waiting["embedder"]
