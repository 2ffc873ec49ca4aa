"""Races and half-done work around ``afi gc`` and ``afi space restore``.

``afi gc`` racing a writer that names an existing blob without bringing its bytes (a fork copying
SRC's versions into DST does so), on PostgreSQL, where the two transactions really overlap.

gc drops a blob no committed version names. A version naming it that is written but not yet
committed must keep it: gc waits for that writer, then sees its version. Without that, the fork
commits versions whose bytes are gone (a read of them is not_found for ever).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from afi.errors import AfiError
from afi.provider import Caller
from afi.providers.memory.gc import collect_garbage
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.workspace.history import FileHistory
from afi.storage.database import open_database

OWNER = Caller(principal="local", space="default")


def _ago(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_gc_waits_for_an_uncommitted_version_naming_a_blob_it_would_drop(pg_store_url: str) -> None:
    database = open_database(pg_store_url)
    src, dst = FileHistory(database, "src"), FileHistory(database, "dst")
    old = src.record_write("plan.txt", b"the old plan\n", _ago(3))
    src.record_write("plan.txt", b"the new plan\n", _ago(2))  # so gc --keep-days 1 drops the old row and blob
    assert old.sha256 is not None
    holding, release, done = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def fork() -> None:
        try:
            with database.transaction():
                dst.add_version("plan.txt", old.sha256, old.size, old.at, "write")  # no bytes: they are shared
                holding.set()
                release.wait(30)
        except BaseException as err:
            errors.append(err)

    def gc() -> None:
        collect_garbage(database, ["src"], 1)
        done.set()

    writer = threading.Thread(target=fork)
    writer.start()
    assert holding.wait(30)
    collector = threading.Thread(target=gc)
    collector.start()
    time.sleep(1.0)
    waited = not done.is_set()
    release.set()
    writer.join(30)
    collector.join(30)
    assert not errors, errors
    assert dst.blob(old.sha256) == b"the old plan\n"  # the bytes DST's version names are kept
    assert waited, "gc did not wait for the writer naming the blob"


def test_a_restore_that_needs_bytes_not_kept_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A version over AFI_HISTORY_MAX_FILE_SIZE keeps its hash only: a restore needing its bytes is refused
    before any file is written (found: the files sorted before it were written back, then it failed)."""
    monkeypatch.setenv("AFI_HISTORY_MAX_FILE_SIZE", "1KiB")
    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    provider.write(OWNER, "/files/a.txt", b"a, as it was")
    provider.write(OWNER, "/files/big.bin", b"B" * 4096)
    time.sleep(0.02)
    then = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    time.sleep(0.02)
    provider.write(OWNER, "/files/a.txt", b"a, today")
    provider.write(OWNER, "/files/big.bin", b"C" * 4096)
    with pytest.raises(AfiError) as refused:
        provider.space_restore(OWNER, then)
    assert refused.value.code == "too_large" and "big.bin" in f"{refused.value.path} {refused.value.message}"
    assert provider.read(OWNER, "/files/a.txt").data == b"a, today"  # nothing was written back
    assert (tmp_path / "files" / "default" / "a.txt").read_bytes() == b"a, today"
    assert provider.read(OWNER, "/files/big.bin").data == b"C" * 4096
