"""What a long-lived mount holds stays bounded: inodes the kernel was never given, memory-only files.

The mount runs in this process (a thread serves it), so the tests can count its inode table and its
memory-only files while real tools (ls, stat, cat, cp, sed, a Python in a subprocess) drive it.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyfuse3
import pytest
import trio

from afi.app.mount import change_token
from afi.bindings.fuse import AfiFS
from afi.providers.memory.provider import MemoryProvider
from tests.support.fuse import needs_fuse, unmount

pytestmark = needs_fuse


async def _serve(fs: AfiFS) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fs.watch)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


@contextmanager
def served(base: Path, **options: Any) -> Iterator[tuple[AfiFS, Path]]:
    """Mount an AfiFS over a fresh store at ``base/m``, served by a thread of this process; always unmount."""
    db, root, mountpoint = base / "afi.db", base / "files", base / "m"
    mountpoint.mkdir()
    provider = MemoryProvider(db, root)
    fs = AfiFS(provider, provider.authenticate(None), change_token=change_token(db), **options)
    pyfuse3.init(fs, str(mountpoint), set(pyfuse3.default_options) | {"fsname=afi-memory", "auto_unmount"})
    failed: list[BaseException] = []

    def run() -> None:
        try:
            trio.run(_serve, fs)
        except BaseException as err:  # reported by the test, not lost in the thread
            failed.append(err)

    thread = threading.Thread(target=run, name="afi-fuse", daemon=True)
    thread.start()
    try:
        yield fs, mountpoint
    finally:
        unmount(mountpoint)
        thread.join(20)
        pyfuse3.close(unmount=False)
    assert not thread.is_alive() and not failed, failed


def sh(script: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, f"{script!r} failed ({done.returncode}): {done.stderr}"
    return done


def python(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


_MISSES = """
import os, sys
mount = sys.argv[1]
for i in range(2000):
    # what shells, editors and git probe: missing notes, names no area stores, folders that are not there
    name = ("facts/missing-%d.md", "facts/.probe-%d.md.swp", "files/absent-%d.txt", "files/.git-%d/HEAD")[i % 4] % i
    try:
        os.stat(os.path.join(mount, name))
    except FileNotFoundError:
        pass
    else:
        raise SystemExit(name + " exists")
"""


def test_failed_lookups_leave_no_inodes(tmp_path: Path) -> None:
    with served(tmp_path) as (fs, mount):
        sh("echo 'kept' > facts/kept.md && ls -l facts files > /dev/null", mount)
        inode = os.stat(mount / "facts" / "kept.md").st_ino
        before = len(fs.inodes)
        python(_MISSES, str(mount))
        for tool in ("stat facts/nope.md", "cat files/nope.txt", "ls facts/nope.swp", "cat files/.git/HEAD"):
            assert sh(tool, mount, check=False).returncode != 0
        assert len(fs.inodes) <= before + 5, f"{len(fs.inodes) - before} inodes left by 2,004 failed lookups"
        assert os.stat(mount / "facts" / "kept.md").st_ino == inode  # what the kernel knows keeps its number


_FIRST_ENTRIES = """
import os, sys
with os.scandir(sys.argv[1]) as listing:  # one getdents, then closed: the listing is not read to the end
    print(next(listing).name)
"""


def test_a_listing_read_in_part_leaves_only_what_the_kernel_was_given(tmp_path: Path) -> None:
    many = 1500
    with served(tmp_path) as (fs, mount):
        folder = tmp_path / "files" / "default" / "many"  # made behind the mount: the kernel knows none of it
        folder.mkdir(parents=True)
        for i in range(many):
            (folder / f"f{i:05d}.txt").write_bytes(b"x")
        assert os.path.isdir(mount / "files" / "many")
        before = len(fs.inodes)
        assert python(_FIRST_ENTRIES, str(mount / "files" / "many")).strip() == "f00000.txt"
        given = len(fs.inodes) - before
        assert given < many // 2, f"{given} inodes for a listing of {many} read in part"
        # Read to the end, every entry reaches the kernel and has its node, with its own number.
        assert len(sh("ls -l files/many", mount).stdout.splitlines()) == many + 1
        assert before + many <= len(fs.inodes) <= before + many + 5
        numbers = sh("stat -c %i files/many/f00000.txt files/many/f01499.txt", mount).stdout.split()
        assert len(set(numbers)) == 2
        assert sh("stat -c %i files/many/f00000.txt", mount).stdout.split() == numbers[:1]


def _memory_only_bytes(fs: AfiFS) -> int:
    return sum(len(local.data) for local in fs.locals.values())


def test_memory_only_files_past_the_byte_budget_are_refused_with_enospc(tmp_path: Path) -> None:
    budget = 256 << 10
    with served(tmp_path, local_bytes=budget) as (fs, mount):
        sh("head -c 100000 /dev/zero > files/part.txt", mount)
        sh("cp files/part.txt facts/one.txt && cp files/part.txt facts/two.txt", mount)  # /facts keeps only .md
        assert set(fs.locals) == {"/facts/one.txt", "/facts/two.txt"}
        refused = sh("cp files/part.txt facts/three.txt", mount, check=False)
        assert refused.returncode != 0 and "No space left on device" in refused.stderr, refused.stderr
        assert _memory_only_bytes(fs) <= budget

        # A program writing on learns it at the write that passes the budget, not at close.
        fd = os.open(mount / "facts" / "stream.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        written = 0
        try:
            with pytest.raises(OSError) as caught:
                for _ in range(64):
                    written += os.write(fd, b"y" * (16 << 10))
        finally:
            os.close(fd)
        assert caught.value.errno == errno.ENOSPC
        assert written < budget and _memory_only_bytes(fs) <= budget

        # Deleting one makes room again; files the provider stores are not held against the budget.
        sh("rm facts/one.txt facts/stream.bin facts/three.txt && cp files/part.txt facts/again.txt", mount)
        sh("head -c 600000 /dev/zero > files/big.bin && cp files/big.bin files/big2.bin", mount)
        sh("printf 'deploy on Tuesday\\n' > facts/deploy.md && sed -i 's/Tuesday/Friday/' facts/deploy.md", mount)
        assert "Friday" in (mount / "facts" / "deploy.md").read_text()
        assert set(fs.locals) == {"/facts/two.txt", "/facts/again.txt"}


def test_memory_only_files_past_the_count_are_refused_with_enospc(tmp_path: Path) -> None:
    with served(tmp_path, local_files=5) as (fs, mount):
        sh("for i in 1 2 3 4 5; do echo $i > facts/t$i.txt; done", mount)
        refused = sh("echo 6 > facts/t6.txt", mount, check=False)
        assert refused.returncode != 0 and "No space left on device" in refused.stderr, refused.stderr
        assert len(fs.locals) == 5 and not (mount / "facts" / "t6.txt").exists()
        sh("echo 'a note is no memory-only file' > facts/note.md && mv facts/t1.txt facts/t1.md", mount)
        sh("echo 6 > facts/t6.txt", mount)
        assert len(fs.locals) == 5


def test_a_memory_only_file_closed_and_unused_is_dropped(tmp_path: Path) -> None:
    with served(tmp_path, local_idle=1.0, timeout=0.2) as (fs, mount):
        sh("echo stray > facts/stray.txt", mount)
        held = os.open(mount / "facts" / "held.txt", os.O_WRONLY | os.O_CREAT)
        try:
            os.write(held, b"still being written\n")
            os.fsync(held)
            assert {"/facts/stray.txt", "/facts/held.txt"} <= set(fs.locals)
            time.sleep(1.5)
            sh("echo 'a change' > files/change.txt", mount)
            assert "/facts/stray.txt" not in fs.locals
            assert "/facts/held.txt" in fs.locals  # open: not stale, however long
            assert "stray.txt" not in sh("ls facts", mount).stdout.split()
        finally:
            os.close(held)
        assert "/facts/held.txt" in fs.locals  # just closed: used now
