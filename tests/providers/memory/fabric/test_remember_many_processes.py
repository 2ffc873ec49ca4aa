"""Two processes writing one scope at once, one in batches and one note by note: a batch takes the scope's
write lock as a single remember does (``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL), so
each note folds into what the other process committed, and no note is lost or written twice. Run on a new
scope and on one of 2,000 notes more, whose SimHash bands name the fold's candidates, so a batch's folds
are searched together while the other process writes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from afi.providers.memory import create_memory, create_memory_fabric

TEXTS = 60  # distinct texts; both writers write every one of them, in opposite orders

_WRITER = textwrap.dedent(
    """
    import sys
    from afi.providers.memory import create_memory, create_memory_fabric

    url, mode, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    fabric = create_memory_fabric(create_memory(url, tenant_id="a", resource_id="b", thread_id="c"))
    texts = [f"service {i} deploys from pipeline {i * 7919 % 1009} to region {i % 13} at {i} past nine"
             for i in range(count)]
    if mode == "batch":
        for at in range(0, count, 10):
            notes = fabric.remember_many([{"kind": "fact", "content": t} for t in texts[at : at + 10]])
            print(*(note.id for note in notes), flush=True)
    else:
        for text in reversed(texts):
            print(fabric.remember(kind="fact", content=text).id, flush=True)
    fabric.memory.close()
    """
)


def _texts() -> set[str]:
    return {f"service {i} deploys from pipeline {i * 7919 % 1009} to region {i % 13} at {i} past nine"
            for i in range(TEXTS)}  # fmt: skip


@pytest.mark.parametrize("stored", [0, 2_000], ids=["new scope", "banded scope"])
def test_a_batch_writer_and_a_single_writer_fold_into_each_other(store_url: str, stored: int) -> None:
    seeding = create_memory_fabric(create_memory(store_url, tenant_id="a", resource_id="b", thread_id="c"))
    for at in range(0, stored, 500):  # other notes, none near the writers' texts
        seeding.remember_many([{"kind": "procedure", "content": f"step {n} of runbook {n * 31 % 977} is to check "
                                f"gauge {n % 17} twice"} for n in range(at, at + 500)])  # fmt: skip
    if stored:
        seeding.memory.store.catch_up_bands(seeding.memory.scope)
        assert seeding.memory.store.band_backlog(seeding.memory.scope) == 0
    seeding.memory.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, store_url, mode, str(TEXTS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for mode in ("batch", "single")
    ]
    acknowledged: set[str] = set()
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        acknowledged |= set(out.split())
    fabric = create_memory_fabric(create_memory(store_url, tenant_id="a", resource_id="b", thread_id="c"))
    try:
        current = [note for note in fabric.notes() if note.content in _texts()]
        # each text is one current note, whichever process wrote it first: the second write folded into it
        assert len(current) == TEXTS
        assert len({note.content for note in current}) == TEXTS
        # every id a writer was handed back is that note's row
        assert acknowledged == {note.id for note in current}
    finally:
        fabric.memory.close()
