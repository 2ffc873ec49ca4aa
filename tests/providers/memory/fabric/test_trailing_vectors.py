"""Vectors made after the write (a sentence embedder's store): no read misses a committed note.

The embedder here is dense and deterministic (a text's vector is a function of its text), and can be
held: while it is, the thread that makes vectors after the writes waits in it, so the tests see the
store as it is between a write's commit and its vector.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from afi.providers.memory import MemoryFabric, create_memory, create_memory_fabric
from afi.providers.memory.fabric.trailing import CATCH_UP
from afi.providers.memory.fabric.vector_bytes import unpack_vector
from afi.storage.database import open_database

WORDS = [
    "harbour",
    "lantern",
    "quartz",
    "meadow",
    "violin",
    "orchard",
    "glacier",
    "saddle",
    "copper",
    "thistle",
    "falcon",
    "ember",
    "pebble",
    "tundra",
    "walnut",
    "cobalt",
    "juniper",
    "marble",
    "saffron",
    "canyon",
]


class Held:
    """A dense test embedder whose calls from the vector thread wait while it is held."""

    name = "test-held-32"
    dims = 32

    def __init__(self) -> None:
        self.free = threading.Event()
        self.free.set()
        self.waiting = threading.Event()  # the vector thread is in a held call

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if threading.current_thread().name == "afi-vectors" and not self.free.is_set():
            self.waiting.set()
            self.free.wait(30)
        return np.stack([vector_of(text) for text in texts]) if texts else np.zeros((0, self.dims), np.float32)


def vector_of(text: str) -> npt.NDArray[np.float32]:
    vector = np.random.default_rng(zlib.crc32(text.encode())).standard_normal(Held.dims).astype(np.float32)
    return vector / np.linalg.norm(vector)


def sentence(n: int) -> str:
    rng = np.random.default_rng(n)
    return " ".join(WORDS[i] for i in rng.choice(len(WORDS), 6, replace=False)) + f" number{n}"


def stored_vectors(db: str) -> dict[str, npt.NDArray[np.float32] | None]:
    """Each note row's content and its vector (None: not made yet), read from the store itself."""
    with open_database(db).read() as conn:
        rows = conn.execute("SELECT content, embedding FROM notes").fetchall()
    out: dict[str, npt.NDArray[np.float32] | None] = {}
    for content, blob in rows:
        if blob is not None and not isinstance(blob, bytes | memoryview):
            blob = np.asarray(blob.to_list() if hasattr(blob, "to_list") else blob, dtype=np.float32)
            out[str(content)] = blob
        else:
            out[str(content)] = None if blob is None else unpack_vector(blob)
    return out


def settled(db: str, timeout: float = 20.0) -> dict[str, npt.NDArray[np.float32] | None]:
    """The store's vectors once none is missing (the thread has made them), or as they are at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        found = stored_vectors(db)
        if all(vector is not None for vector in found.values()) or time.monotonic() > deadline:
            return found


@pytest.fixture
def held() -> Held:
    return Held()


@pytest.fixture
def fabric(store_url: str, held: Held) -> Iterator[MemoryFabric]:
    made = create_memory_fabric(create_memory(store_url, tenant_id="t", resource_id="r", thread_id="main",
                                              embedder=held))  # fmt: skip
    yield made
    held.free.set()
    made.memory.close()


def test_a_write_commits_before_its_vector_and_every_read_finds_it(fabric: MemoryFabric, held: Held,
                                                                   store_url: str) -> None:  # fmt: skip
    held.free.clear()
    fabric.remember(kind="fact", content=sentence(0))  # the thread takes it, and waits in the embedder
    assert held.waiting.wait(10)
    written = [fabric.remember(kind="fact", content=sentence(n)) for n in range(1, CATCH_UP + 10)]
    assert all(vector is None for vector in stored_vectors(store_url).values())  # committed, no vector yet

    for n in (1, 7, CATCH_UP + 9):  # found by its words, and the answer says what it could not weigh
        result = fabric.recall(f"number{n}")
        assert result.hits and result.hits[0].id == written[n - 1].id
        assert result.vectors_pending == CATCH_UP + 10
        assert result.explain[0].cosine == 0.0
    assert fabric.find("fact", written[4].name) is not None

    held.free.set()
    vectors = settled(store_url)
    assert len(vectors) == CATCH_UP + 10
    for content, vector in vectors.items():  # each vector is its own text's (at half precision)
        assert vector is not None and np.allclose(vector, vector_of(content), atol=2e-3)
    result = fabric.recall(sentence(7))
    assert result.vectors_pending is None
    assert result.hits[0].id == written[6].id and result.explain[0].cosine > 0.99


def test_a_recall_just_after_a_few_writes_makes_their_vectors_first(fabric: MemoryFabric, held: Held,
                                                                     store_url: str) -> None:  # fmt: skip
    held.free.clear()
    first = fabric.remember(kind="fact", content=sentence(100))
    assert held.waiting.wait(10)  # the thread is stuck in the embedder: only the recall can make them
    notes = [first, *(fabric.remember(kind="fact", content=sentence(n)) for n in range(101, 104))]

    result = fabric.recall(sentence(102))

    assert result.vectors_pending is None
    assert result.hits[0].id == notes[2].id and result.explain[0].cosine > 0.99
    assert all(vector is not None for vector in stored_vectors(store_url).values())


def test_an_edit_before_its_vector_gets_the_vector_of_its_new_text(fabric: MemoryFabric, held: Held,
                                                                   store_url: str) -> None:  # fmt: skip
    held.free.clear()
    note = fabric.remember(kind="fact", content="the meeting room is harbour", name="room")
    assert held.waiting.wait(10)  # the thread holds the first text and will embed it
    # the row rewritten in place
    fabric.remember(kind="fact", content="the meeting room is lantern", id=note.id, name="room")

    held.free.set()
    vectors = settled(store_url)

    assert set(vectors) == {"the meeting room is lantern"}
    assert np.allclose(vectors["the meeting room is lantern"], vector_of("the meeting room is lantern"), atol=2e-3)


def test_a_batch_is_found_by_its_words_at_once_and_by_meaning_once_filled(fabric: MemoryFabric, held: Held,
                                                                          store_url: str) -> None:  # fmt: skip
    held.free.clear()
    fabric.remember(kind="fact", content=sentence(200))
    assert held.waiting.wait(10)
    batch = fabric.remember_many([{"kind": "fact", "content": sentence(n)} for n in range(201, 301)])

    assert len(batch) == 100
    found = fabric.recall("number250")
    assert found.hits[0].id == batch[49].id and found.vectors_pending == 101

    held.free.set()
    assert fabric.fill_vectors() >= 0
    assert all(vector is not None for vector in settled(store_url).values())
    assert fabric.recall(sentence(250)).explain[0].cosine > 0.99


def test_vectors_filled_by_another_process_reach_this_ones_index(store_url: str, held: Held) -> None:
    """Two memories over one store, as two processes (each its own connections and vector index): the
    one that recalls learns of the vectors the other made from the store's log of fills."""
    reader = create_memory_fabric(create_memory(store_url, tenant_id="t", resource_id="r", thread_id="main",
                                                embedder=held))  # fmt: skip
    writer = create_memory_fabric(create_memory(store_url, tenant_id="t", resource_id="r", thread_id="main",
                                                embedder=held))  # fmt: skip
    try:
        held.free.clear()
        writer.remember(kind="fact", content=sentence(400))
        assert held.waiting.wait(10)
        notes = [writer.remember(kind="fact", content=sentence(n)) for n in range(401, 401 + CATCH_UP + 5)]
        assert reader.recall("number410").vectors_pending == CATCH_UP + 6  # the reader's index loads now

        held.free.set()
        assert all(vector is not None for vector in settled(store_url).values())
        result = reader.recall(sentence(410))

        assert result.vectors_pending is None
        assert result.hits[0].id == notes[9].id and result.explain[0].cosine > 0.99
    finally:
        held.free.set()
        writer.memory.close()
        reader.memory.close()


KILLED = textwrap.dedent("""
    import os, sys, threading
    sys.path.insert(0, {root!r})
    from tests.providers.memory.fabric.test_trailing_vectors import Held, sentence
    from afi.providers.memory import create_memory, create_memory_fabric
    held = Held()
    held.free.clear()  # the vector thread never makes a vector
    fabric = create_memory_fabric(create_memory({db!r}, tenant_id="t", resource_id="r", thread_id="main",
                                                embedder=held))
    for n in range(500, 540):
        fabric.remember(kind="fact", content=sentence(n))
    print("written", flush=True)
    sys.stdin.read()
""")


def test_kill_9_before_the_vectors_leaves_the_notes_whole_and_the_next_write_fills_them(
    store_url: str, held: Held
) -> None:
    root = str(Path(__file__).resolve().parents[4])
    command = [sys.executable, "-c", KILLED.format(root=root, db=store_url)]
    env = {**os.environ, "PYTHONPATH": root}
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "written"
        finally:
            child.kill()  # SIGKILL: no exit hook runs
            child.wait()
    assert len(stored_vectors(store_url)) == 40
    assert all(vector is None for vector in stored_vectors(store_url).values())

    fabric = create_memory_fabric(create_memory(store_url, tenant_id="t", resource_id="r", thread_id="main",
                                                embedder=held))  # fmt: skip
    try:
        found = fabric.recall("number520")  # every acknowledged note is there, found by its words
        assert found.hits and found.hits[0].content == sentence(520) and found.vectors_pending == 40
        fabric.remember(kind="fact", content=sentence(600))  # a write wakes the thread, which makes them all
        vectors = settled(store_url)
        assert len(vectors) == 41
        assert all(vector is not None and np.allclose(vector, vector_of(text), atol=2e-3)
                   for text, vector in vectors.items())  # fmt: skip
    finally:
        fabric.memory.close()


def test_a_process_that_wrote_makes_its_vectors_before_it_exits(store_url: str) -> None:
    root = str(Path(__file__).resolve().parents[4])
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {root!r})
        from tests.providers.memory.fabric.test_trailing_vectors import Held, sentence
        from afi.providers.memory import create_memory, create_memory_fabric
        fabric = create_memory_fabric(create_memory({store_url!r}, tenant_id="t", resource_id="r",
                                                    thread_id="main", embedder=Held()))
        fabric.remember_many([{{"kind": "fact", "content": sentence(n)}} for n in range(700, 900)])
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, env={**os.environ, "PYTHONPATH": root})

    vectors = stored_vectors(store_url)
    assert len(vectors) == 200 and all(vector is not None for vector in vectors.values())


def test_a_recall_while_another_writer_holds_the_store_answers_by_the_words(tmp_path: Path) -> None:
    """SQLite: a writer holds the store past the busy timeout while a recall would make the vectors of
    the few notes waiting. The recall answers all the same (by their words, saying so), and the vectors
    are made once the writer lets go."""
    import sqlite3

    db = str(tmp_path / "afi.db")
    held = Held()
    fabric = create_memory_fabric(create_memory(db, tenant_id="t", resource_id="r", thread_id="main",
                                                embedder=held))  # fmt: skip
    try:
        held.free.clear()
        notes = [fabric.remember(kind="fact", content=sentence(n)) for n in range(800, 803)]
        assert held.waiting.wait(10)
        with sqlite3.connect(db, isolation_level=None) as other:
            other.execute("BEGIN IMMEDIATE")  # another process's long write
            result = fabric.recall("number801")
            other.execute("ROLLBACK")
        assert result.hits[0].id == notes[1].id and result.vectors_pending == 3
        held.free.set()
        assert all(vector is not None for vector in settled(db).values())
    finally:
        held.free.set()
        fabric.memory.close()


def test_a_process_makes_only_its_own_notes_vectors_before_it_exits_and_its_thread_ends_when_idle(
    store_url: str, fabric: MemoryFabric, held: Held
) -> None:
    """Another process's notes still waiting are its own to make: a command that wrote one note does not
    stay behind at its exit embedding a server's backlog. An idle vector thread ends (a write starts
    another), so a memory let go of holds no thread."""
    held.free.clear()
    fabric.remember(kind="fact", content=sentence(900))
    assert held.waiting.wait(10)
    for n in range(901, 941):  # this process's backlog, its thread held in the embedder
        fabric.remember(kind="fact", content=sentence(n))
    root = str(Path(__file__).resolve().parents[4])
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {root!r})
        from tests.providers.memory.fabric.test_trailing_vectors import Held, sentence
        from afi.providers.memory import create_memory, create_memory_fabric
        fabric = create_memory_fabric(create_memory({store_url!r}, tenant_id="t", resource_id="r",
                                                    thread_id="main", embedder=Held()))
        fabric.remember(kind="fact", content=sentence(999))
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, env={**os.environ, "PYTHONPATH": root})

    vectors = stored_vectors(store_url)
    assert vectors[sentence(999)] is not None  # its own, made before it exited
    # this process's are left to this process: the other's thread may have made a batch of them before
    # its exit stopped it (a thread helps with its scope's backlog while its process lives), not all
    assert sum(vector is None for vector in vectors.values()) >= 41 - 32

    held.free.set()
    assert all(vector is not None for vector in settled(store_url).values())
    trailing = fabric.memory.trailing
    assert trailing is not None
    deadline = time.monotonic() + 10
    while trailing._thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert trailing._thread is None


WRITER = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    from tests.providers.memory.fabric.test_trailing_vectors import Held, sentence
    from afi.providers.memory import create_memory, create_memory_fabric
    me = {me}
    fabric = create_memory_fabric(create_memory({db!r}, tenant_id="t", resource_id="r", thread_id="main",
                                                embedder=Held()))
    for k in range(30):
        n = 10_000 * (me + 1) + k
        if k % 3 == 2:  # a batch, some of it rewriting names this writer wrote before
            notes = fabric.remember_many([{{"kind": "fact", "content": sentence(n * 10 + j),
                                            "name": f"w{{me}}-topic-{{j}}"}} for j in range(4)])
        else:  # a new note, or a new version of one of the names
            notes = [fabric.remember(kind="fact", content=sentence(n), name=f"w{{me}}-topic-{{k % 5}}")]
        for note in notes:
            print(json.dumps([note.id, note.content]), flush=True)
        if me == 1 and k == 15:
            sys.stdin.readline()  # killed while it waits here
""")


def test_writers_in_three_processes_one_killed_leave_every_acknowledged_note_with_its_own_texts_vector(
    store_url: str,
) -> None:
    """Three processes write one scope at once (new notes, new versions of names, batches), each making
    vectors after its writes; one is killed with SIGKILL part-way. Every note a writer was answered for
    is in the store as last answered, and once the vectors are made each is its own text's: no fill
    crossed an edit, no fill and write deadlocked (a writer would have failed), nothing was lost."""
    root = str(Path(__file__).resolve().parents[4])
    env = {**os.environ, "PYTHONPATH": root}
    acknowledged: dict[str, str] = {}  # note id -> the content the writer was last answered with
    answers = [0, 0, 0]
    pipe = subprocess.PIPE
    commands = [[sys.executable, "-c", WRITER.format(root=root, db=store_url, me=me)] for me in range(3)]
    children = [subprocess.Popen(command, stdin=pipe, stdout=pipe, text=True, env=env) for command in commands]
    try:
        for me in (1, 0, 2):  # the one to kill first: it waits for its kill after its 16th write
            stdout = children[me].stdout
            assert stdout is not None
            for line in stdout:
                note_id, content = json.loads(line)
                acknowledged[note_id] = content
                answers[me] += 1
                if me == 1 and answers[me] == KILLED_AFTER:
                    children[me].kill()  # SIGKILL part-way, its vector thread perhaps mid-batch
                    break
        codes = [child.wait(timeout=120) for child in children]
    finally:
        for child in children:
            child.kill()
            child.wait()
            for stream in (child.stdin, child.stdout):
                if stream is not None:
                    stream.close()
    assert codes == [0, -9, 0] and answers == [60, KILLED_AFTER, 60]

    reader = create_memory_fabric(create_memory(store_url, tenant_id="t", resource_id="r", thread_id="main",
                                                embedder=Held()))  # fmt: skip
    try:
        reader.fill_vectors()  # what the killed writer left
    finally:
        reader.memory.close()
    rows = stored_by_id(store_url)
    assert [note_id for note_id, content in acknowledged.items() if rows.get(note_id, (None,))[0] != content] == []
    wrong = [text for text, vector in rows.values()
             if vector is None or not np.allclose(vector, vector_of(text), atol=2e-3)]  # fmt: skip
    assert wrong == []


# the killed writer's answers before it waits: 11 single notes and 5 batches of 4 (its writes 0..15)
KILLED_AFTER = 11 + 5 * 4


def stored_by_id(db: str) -> dict[str, tuple[str, npt.NDArray[np.float32] | None]]:
    """Each note row's id, content and vector (None: not made yet)."""
    with open_database(db).read() as conn:
        ids = dict(conn.execute("SELECT content, id FROM notes").fetchall())
    return {str(ids[content]): (content, vector) for content, vector in stored_vectors(db).items()}
