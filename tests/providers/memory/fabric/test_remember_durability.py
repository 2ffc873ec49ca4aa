"""A SQLite store's remember: checkpointed in large steps, yet every acknowledged note survives ``kill -9``."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from afi.providers.memory import create_memory, create_memory_fabric

_WRITER = textwrap.dedent(
    """
    import sys
    from afi.providers.memory import create_memory, create_memory_fabric

    fabric = create_memory_fabric(create_memory(sys.argv[1], tenant_id="a", resource_id="b", thread_id="c"))
    i = 0
    while True:
        text = f"note {i} about the rollout of service {i * 7919 % 100003} in region {i % 13}"
        note = fabric.remember(kind="fact", content=text)
        print(note.id, i, flush=True)
        i += 1
    """
)


def _wal_frames(db: Path) -> int:
    """How many frames the WAL holds since it last started over (a checkpoint lets it start over)."""
    with sqlite3.connect(db) as conn:
        return int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])


def test_the_wal_is_not_checkpointed_every_thousand_pages(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    memory = create_memory(db, tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory)
    frames = 0
    for i in range(400):
        fabric.remember(kind="fact", content=f"note {i} on the deploy of service {i * 7919 % 100003}")
        if i % 20 == 19:
            frames = os.path.getsize(f"{db}-wal") // 4096
            if frames > 1500:
                break
    # SQLite's default would have checkpointed and started the WAL over at 1,000 pages
    assert frames > 1500 and _wal_frames(db) > 1500
    memory.close()


def test_every_acknowledged_remember_survives_kill_9(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    create_memory(db, tenant_id="a", resource_id="b", thread_id="c").close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    acknowledged: dict[str, int] = {}
    with subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(db)], stdout=subprocess.PIPE, text=True, env=env
    ) as writer:
        assert writer.stdout is not None
        try:
            for line in writer.stdout:
                note_id, number = line.split()
                acknowledged[note_id] = int(number)
                if len(acknowledged) >= 300:
                    break
        finally:
            writer.send_signal(signal.SIGKILL)
            writer.wait()
    assert len(acknowledged) >= 300
    memory = create_memory(db, tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory)
    for note_id, i in acknowledged.items():
        note = fabric.get(note_id)
        assert note is not None and note.content.startswith(f"note {i} ")
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    memory.close()
