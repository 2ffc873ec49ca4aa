"""Per-thread SQLite connections close when their thread ends, even with the cyclic collector idle.

Worker pools (anyio's for HTTP, trio's for FUSE) retire idle threads and start new ones; a connection
left to the garbage collector holds its descriptors and page cache until a collection happens to run.
"""

from __future__ import annotations

import gc
import itertools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from afi.auth.keys import KeyStore
from afi.auth.receipts import ReceiptStore
from afi.auth.ssh_keys import SshKeyStore
from afi.provider import Caller
from afi.sqlite import Connections


@pytest.fixture
def collector_idle() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _in_fresh_threads(work: Callable[[], object], count: int = 100) -> None:
    for _ in range(count):
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()


def _stores(db: Path) -> dict[str, Callable[[], object]]:
    keys, ssh_keys, receipts, connections = KeyStore(db), SshKeyStore(db), ReceiptStore(db), Connections(db)
    serial = itertools.count()
    return {
        "keys": keys.count,
        "ssh_keys": ssh_keys.count,
        "receipts": lambda: receipts.claim(Caller("local"), "afi.write", f"key-{next(serial)}", {"n": 1}),
        "connections": lambda: connections.get().execute("SELECT 1").fetchall(),
    }


@pytest.mark.parametrize("store", ["keys", "ssh_keys", "receipts", "connections"])
def test_a_retired_threads_connection_is_closed(tmp_path: Path, collector_idle: None, store: str) -> None:
    work = _stores(tmp_path / "afi.db")[store]
    work()
    before = _open_descriptors()
    _in_fresh_threads(work)
    assert _open_descriptors() <= before + 5


def test_close_closes_only_the_calling_threads_connection(tmp_path: Path) -> None:
    """Another thread may be mid-query: closing its connection under it could crash SQLite."""
    connections = Connections(tmp_path / "afi.db")
    theirs: list[sqlite3.Connection] = []
    ready, release = threading.Barrier(2), threading.Event()

    def hold() -> None:
        theirs.append(connections.get())
        ready.wait()
        release.wait()
        theirs[0].execute("SELECT 1").fetchall()  # still open after the main thread closed its own

    thread = threading.Thread(target=hold)
    thread.start()
    ready.wait()
    mine = connections.get()
    connections.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        mine.execute("SELECT 1")
    release.set()
    thread.join()
    assert connections.get() is not mine  # the next use opens a fresh one
