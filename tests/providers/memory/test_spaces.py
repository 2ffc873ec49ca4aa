"""Touching many spaces costs bounded memory and descriptors: idle spaces and their lock files are let go."""

from __future__ import annotations

import gc
import os
import signal
import threading
from pathlib import Path

import pytest

from afi.errors import InvalidPath
from afi.model import SearchRequest
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.workspace.locks import SpaceLocks


def _caller(space: str) -> Caller:
    return Caller(principal="local", space=space)


def _descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.slow
def test_touching_hundreds_of_spaces_keeps_a_bounded_set_open(tmp_path: Path) -> None:
    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    first = _caller("s0")
    provider.write(first, "/facts/kept.md", b"the canary deploy")
    provider.write(first, "/files/kept.txt", b"hello")
    counts = []
    for i in range(1, 1001):
        who = _caller(f"s{i}")
        provider.stat(who, "/facts")
        provider.list(who, "/files")
        provider.write(who, f"/facts/n{i}.md", f"note {i}".encode())
        provider.search(who, SearchRequest.model_validate({"query": {"semantic": "note"}}))
        if i % 100 == 0:
            # A space let go is freed, connections and all, by the cycle collector (its fabric and
            # vector index refer to each other); a server's runs on its own schedule, this one on ours.
            gc.collect()
            counts.append(_descriptors())
    spaces = provider._spaces
    locks = provider._write_locks
    assert spaces.open_count() <= spaces.keep
    assert locks.open_count() <= locks.keep
    after_600, after_1000 = counts[5], counts[9]  # both past the bounds: the last 400 spaces add nothing
    assert after_1000 - after_600 < 16, f"descriptors grew with the spaces touched: {counts}"
    # the first space was let go long ago; it opens again from the store with everything in it
    assert b"the canary deploy" in provider.read(first, "/facts/kept.md").data
    assert provider.read(first, "/files/kept.txt").data == b"hello"
    hits = provider.search(first, SearchRequest.model_validate({"query": "canary"})).matches
    assert "/facts/kept.md" in {m.path for m in hits}


def test_a_space_let_go_mid_write_loses_nothing(tmp_path: Path) -> None:
    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    provider._spaces.keep = 2
    provider._write_locks.keep = 2
    counter = _caller("counted")
    provider.write(counter, "/files/n.txt", b"0")
    errors: list[BaseException] = []

    def bump(times: int) -> None:
        try:
            for _ in range(times):
                while True:
                    entry = provider.stat(counter, "/files/n.txt")
                    value = int(provider.read(counter, "/files/n.txt").data)
                    try:
                        provider.write(counter, "/files/n.txt", str(value + 1).encode(), if_match=entry.etag)
                        break
                    except Exception as err:  # a conflict: read again
                        if getattr(err, "code", None) != "conflict":
                            raise

        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    def churn(stop: threading.Event) -> None:
        i = 0
        while not stop.is_set():
            provider.stat(_caller(f"other{i % 7}"), "/facts")
            i += 1

    stop = threading.Event()
    churner = threading.Thread(target=churn, args=(stop,))
    churner.start()
    workers = [threading.Thread(target=bump, args=(50,)) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    stop.set()
    churner.join(60)
    assert not any(w.is_alive() for w in workers), "a writer is stuck (a lock it cannot get)"
    assert not errors, errors
    assert provider.read(counter, "/files/n.txt").data == b"150"


def test_a_nested_hold_after_the_lock_was_forgotten_does_not_lock_itself_out(tmp_path: Path) -> None:
    locks = SpaceLocks(tmp_path / "locks", keep=1)

    def timed_out(_signum: int, _frame: object) -> None:
        raise TimeoutError("the nested hold waited on this thread's own lock")

    previous = signal.signal(signal.SIGALRM, timed_out)
    signal.alarm(5)
    try:
        with locks.hold("a"):
            # What another thread's eviction does between a _lock() and its acquire(): the held lock
            # is no longer the one the store's table hands out.
            locks._locks.pop("a")
            with locks.hold("a"):  # the provider re-enters this way: a write that opens its space
                pass
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_reading_a_space_makes_no_folder_and_its_first_write_does(store_url: str, tmp_path: Path) -> None:
    """Every read verb over a space nothing was written to answers as an empty space and leaves no
    folder behind; the first write, of a file or a folder, makes it."""
    root = tmp_path / "files"
    provider = MemoryProvider(store_url, root)
    for space in ("idle", "first-file", "first-folder"):
        who = _caller(space)
        assert provider.stat(who, "/files").type == "directory"
        assert provider.list(who, "/files").entries == []
        assert provider.list(who, "/facts").entries == []
        assert [e.path for e in provider.list(who, "/").entries]  # the fixed areas are always there
        for query in ("anything", {"regex": "any.*thing"}, {"semantic": "anything"}):
            assert provider.search(who, SearchRequest.model_validate({"query": query})).matches == []
        for missing in ("/files/nope.txt", "/files/a/b"):
            try:
                provider.read(who, missing)
            except Exception as err:
                assert getattr(err, "code", None) == "not_found", err
        assert not (root / space).exists()
    provider.write(_caller("first-file"), "/files/a.txt", b"hello")
    provider.mkdir(_caller("first-folder"), "/files/notes")
    assert (root / "first-file" / "a.txt").read_bytes() == b"hello"
    assert (root / "first-folder" / "notes").is_dir()
    assert provider.list(_caller("first-folder"), "/files").entries[0].path == "/files/notes"
    assert not (root / "idle").exists()


def test_a_file_note_in_a_space_whose_folder_is_not_made_yet_is_remembered(tmp_path: Path) -> None:
    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    owner = Caller(principal="local", space="fresh", scopes=frozenset({"afi:admin"}))
    note = provider.remember(owner, kind="file", path="docs/plan.txt", content="the plan: ship in june")
    assert note.path == "docs/plan.txt"  # it was an internal error: the space's folder did not exist yet
    with pytest.raises(InvalidPath, match=r"'\.\.' is refused"):
        provider.remember(owner, kind="file", path="../outside.txt", content="no")
