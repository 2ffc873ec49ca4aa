"""Issue 11 through the FUSE door: hostile os calls on a real mount, and never EIO.

One ``afi mount`` (a real kernel mount, the binding in its own process) takes a deterministic corpus
of 1,000+ os calls: names with control characters and bytes that are not UTF-8, names at and past the
kernel's 255-byte limit, names the store refuses, writes and truncates at huge offsets, renames across
areas, extended attributes, and garbage fed to ``/.afi/search``. Every call must succeed or fail with
an errno other than EIO (EIO is how the binding surfaces an internal error or a stray exception), the
mount must answer every call in seconds, and a normal write and read must work at the end.

The calls run in a worker thread under a watchdog: a call that hangs makes the watchdog kill the
mount, so the blocked call returns (ENOTCONN) and the test ends with the case named instead of hanging.
"""

from __future__ import annotations

import errno
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.fuse import Mount, afi_mount, needs_fuse, unmount
from tests.support.hostile import (
    BAD_REGEXES,
    BOGUS_CURSORS,
    BOMB_BAIT,
    CONTROL,
    REGEX_BOMBS,
    Tally,
    hostile_name_bytes,
    hostile_text,
    malformed_json,
)

pytestmark = needs_fuse

SEED = 11
CASES = 2000  # os calls are cheap: twice the 1,000
DEADLINE = 20.0  # seconds one os call may take before the watchdog calls it a hang
MAX_FILE = "16M"
AREAS = [b"files", b"facts", b"procedures", b"working", b"history", b"episodes", b"sessions", b".afi", b""]
SIZES = [0, 1, 4095, 4096, 1 << 20, (16 << 20) + 1, 2**31, 2**32, 10**9, 2**40, 2**62, 2**63 - 1]
XATTRS = [b"user.afi.entry", b"user.afi.etag", b"user.afi.content_type", b"user.x", b"security.selinux"]
XATTRS += [b"trusted.x", b"system.posix_acl_access", b"user." + b"x" * 250, b"user.\xff"]
OPS = ["stat", "lstat", "listdir", "read", "create", "pwrite", "truncate", "ftruncate", "mkdir", "rmdir", "unlink"]
OPS += ["rename", "getxattr", "setxattr", "listxattr", "removexattr", "symlink", "link", "chmod", "utime"]
OPS += ["readlink", "mkfifo", "access", "search", "opendir_write"]


def hostile_name(rng: random.Random) -> bytes:
    """Given a generator, return one name as the kernel passes it: no NUL, no '/', maybe past 255 bytes."""
    roll = rng.random()
    if roll < 0.08:
        return b"n" * rng.choice([254, 255, 256, 4096])
    if roll < 0.15:
        return rng.choice([b"x.txt", b"x.md", b"a.md", b".x.md.swp", b"4913", b"sedAbc123", b"~x", b".md", b"-"])
    if roll < 0.2:
        return rng.choice(CONTROL).encode("utf-8").replace(b"\x00", b"_")
    return hostile_name_bytes(rng)


KNOWN = [b"files/bait.txt", b"facts/seed.md", b"files/dir", b"files/dir/inner.txt", b"working/core.md", b"files"]
KNOWN += [b"facts", b".afi/manifest.json", b".afi/search", b".afi", b"history", b"", b"files/new.bin", b"facts/new.md"]


def hostile_relpath(rng: random.Random) -> bytes:
    """Given a generator, return a path below the mountpoint: one that exists, or an area and hostile names."""
    if rng.random() < 0.3:
        return rng.choice(KNOWN)
    parts = [rng.choice(AREAS)] + [hostile_name(rng) for _ in range(1 if rng.random() < 0.7 else 2)]
    return b"/".join(part for part in parts if part)


def fuse_cases(seed: int, count: int) -> list[tuple[str, tuple[Any, ...]]]:
    """Given a seed, return ``count`` or more (operation, arguments): the hand list, then generated ones."""
    rng = random.Random(seed)
    cases: list[tuple[str, tuple[Any, ...]]] = []
    for size in SIZES:
        cases += [("pwrite", (b"files/at-offset.bin", size)), ("truncate", (b"files/bait.txt", size))]
        cases += [("ftruncate", (b"files/f.bin", size)), ("pwrite", (b"facts/at-offset.md", size))]
        cases += [("truncate", (b"facts/seed.md", size)), ("read", (b"files/bait.txt", size))]
        cases += [("pwrite", (b"files/.swp-" + str(size).encode(), size)), ("ftruncate", (b"facts/x.txt", size))]
    for source, target in [
        (b"files/bait.txt", b"facts/bait.md"),
        (b"facts/seed.md", b"files/seed.md"),
        (b"facts/seed.md", b"procedures/seed.md"),
        (b"facts/seed.md", b"history/seed.md"),
        (b"files", b"files/in"),
        (b"files/bait.txt", b"files/bait.txt/in"),
        (b"facts", b"facts2"),
        (b".afi/search", b"files/search"),
        (b".afi/manifest.json", b"files/manifest.json"),
        (b"working/core.md", b"facts/core.md"),
        (b"files/new.bin", b"facts/new.txt"),
    ]:
        cases.append(("rename", (source, target)))
    for name in XATTRS:
        cases += [("getxattr", (b"files/bait.txt", name)), ("setxattr", (b"facts/seed.md", name))]
        cases += [("removexattr", (b"", name))]
    rng_json = random.Random(seed + 1)
    for body in malformed_json(rng_json):
        cases.append(("search", (body[: 1 << 20],)))
    for regex in BAD_REGEXES:
        cases.append(("search", (json.dumps({"query": {"regex": regex}}).encode(),)))
    for cursor in BOGUS_CURSORS:
        cases.append(("search", (json.dumps({"query": "a", "cursor": cursor}).encode(),)))
    while len(cases) < count:
        op = rng.choice(OPS)
        first, second = hostile_relpath(rng), hostile_relpath(rng)
        if op in ("rename", "symlink", "link"):
            cases.append((op, (first, second)))
        elif op in ("pwrite", "truncate", "ftruncate", "read"):
            cases.append((op, (first, rng.choice(SIZES))))
        elif op in ("getxattr", "setxattr", "removexattr"):
            cases.append((op, (first, rng.choice(XATTRS))))
        elif op == "search":
            body = rng.choice([hostile_text(rng).encode("utf-8", "surrogatepass"), *malformed_json()[:12]])
            cases.append((op, (body,)))
        elif op == "create":
            flags = rng.choice([0, os.O_EXCL, os.O_TRUNC, os.O_APPEND, os.O_EXCL | os.O_TRUNC])
            cases.append((op, (first, flags)))
        else:
            cases.append((op, (first,)))
    return cases


def _in(mount: bytes, relative: bytes) -> bytes:
    return mount + b"/" + relative if relative else mount


def _with_fd(path: bytes, flags: int, act: Callable[[int], object]) -> None:
    fd = os.open(path, flags, 0o644)
    try:
        act(fd)
    finally:
        os.close(fd)


def fuse_call(mount: bytes, op: str, args: tuple[Any, ...]) -> None:
    """Make one os call (file operations open, act and close their own descriptor)."""
    path = _in(mount, args[0]) if op != "search" else mount + b"/.afi/search"
    if op in ("stat", "lstat", "listdir", "rmdir", "unlink", "mkdir", "readlink", "listxattr"):
        getattr(os, op)(path)
    elif op == "read":
        _with_fd(path, os.O_RDONLY, lambda fd: os.pread(fd, 4096, min(args[1], 2**63 - 1)))
    elif op == "create":
        _with_fd(path, os.O_WRONLY | os.O_CREAT | args[1], lambda fd: os.write(fd, b"hostile\n"))
    elif op == "pwrite":
        _with_fd(path, os.O_WRONLY | os.O_CREAT, lambda fd: os.pwrite(fd, b"x", args[1]))
    elif op == "truncate":
        os.truncate(path, args[1])
    elif op == "ftruncate":
        _with_fd(path, os.O_RDWR | os.O_CREAT, lambda fd: os.ftruncate(fd, args[1]))
    elif op == "rename":
        os.rename(path, _in(mount, args[1]))
    elif op in ("symlink", "link"):
        getattr(os, op)(path, _in(mount, args[1]))
    elif op == "getxattr":
        os.getxattr(path, args[1])
    elif op == "setxattr":
        os.setxattr(path, args[1], b"value")
    elif op == "removexattr":
        os.removexattr(path, args[1])
    elif op == "chmod":
        os.chmod(path, 0o7777)
    elif op == "utime":
        os.utime(path, ns=(2**62, -(2**62)))
    elif op == "mkfifo":
        os.mkfifo(path)
    elif op == "access":
        os.access(path, os.R_OK | os.W_OK | os.X_OK)
    elif op == "opendir_write":
        _with_fd(path, os.O_WRONLY | os.O_DIRECTORY, lambda fd: None)
    elif op == "search":

        def ask(fd: int) -> None:
            os.write(fd, args[0])
            os.pread(fd, 1 << 16, 0)

        _with_fd(path, os.O_RDWR, ask)
    else:  # pragma: no cover - every op above is listed in OPS
        raise AssertionError(op)


def judge_fuse(err: BaseException) -> str | None:
    """Given what an os call raised, return why it is a failure (None: an errno the caller can act on)."""
    if not isinstance(err, OSError):
        return f"{type(err).__name__}: {err}"
    if err.errno in (errno.EIO, errno.ENOTCONN):
        return f"{errno.errorcode.get(err.errno or 0, err.errno)}: {err}"
    return None


class Watched:
    """Runs os calls in a worker thread; a call that outlives ``DEADLINE`` gets the mount killed, so it returns."""

    def __init__(self, mount: Mount) -> None:
        self.mount = mount
        self.started: float | None = None
        self.current: Any = None
        self.hung: Any = None

    def run(self, cases: list[tuple[str, tuple[Any, ...]]], tally: Tally) -> None:
        root = os.fsencode(self.mount.path)

        def body() -> None:
            for case in cases:
                if self.hung is not None:
                    return
                tally.tried += 1
                self.started, self.current = time.monotonic(), case
                try:
                    fuse_call(root, *case)
                except BaseException as err:
                    why = judge_fuse(err)
                    if why is not None and self.hung is None:
                        tally.fail(case, why)
                finally:
                    self.started = None

        worker = threading.Thread(target=body, daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(0.5)
            started = self.started
            if started is not None and time.monotonic() - started > DEADLINE:
                self.hung = self.current
                tally.fail(self.current, f"no answer in {DEADLINE} s: the mount was killed to end the call")
                self.mount.process.kill()
                unmount(self.mount.path)
                worker.join(30)
                return


@pytest.fixture(scope="module")
def mounted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    """One ``afi mount`` for the module over a fresh store, with a 16 MiB per-file cap, seeded with a bait file."""
    base = tmp_path_factory.mktemp("fuse-attacks")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AFI_MAX_FILE_SIZE", MAX_FILE)
        with afi_mount(base / "m", base / "afi.db", base / "files") as mount:
            (mount.path / "files" / "bait.txt").write_text(f"{BOMB_BAIT}\nsome text\n")
            (mount.path / "facts" / "seed.md").write_text("a fact about aaaa\n")
            (mount.path / "files" / "dir").mkdir()
            (mount.path / "files" / "dir" / "inner.txt").write_text("inner\n")
            (mount.path / "working" / "core.md").write_text("a working line\n")
            yield mount


def alive(mount: Mount) -> None:
    """The mount still serves a write and a read, and it is still mounted."""
    assert mount.process.poll() is None, "the mount process ended"
    after = mount.path / "files" / "after.txt"
    after.write_text("still here\n")
    assert after.read_text() == "still here\n"


def test_hostile_os_calls_on_a_real_mount(mounted: Mount) -> None:
    tally = Tally("FUSE os calls")
    Watched(mounted).run(fuse_cases(SEED, CASES), tally)
    print(tally.report())
    assert tally.tried >= CASES
    assert not tally.failures, tally.report()
    alive(mounted)


def test_regex_bombs_through_the_search_file(mounted: Mount) -> None:
    """Last in the module: a bomb that hangs the mount gets it killed by the watchdog and ends the test."""
    tally = Tally("FUSE regex bombs")
    cases: list[tuple[str, tuple[Any, ...]]] = []
    for bomb in REGEX_BOMBS:
        for scope in ("/files", "/files/bait.txt", "/"):
            cases.append(("search", (json.dumps({"query": {"regex": bomb}, "path": scope}).encode(),)))
    watched = Watched(mounted)
    began = time.monotonic()
    watched.run(cases, tally)
    slow = time.monotonic() - began
    print(tally.report(), f"({slow:.1f} s)")
    assert not tally.failures, tally.report()
    alive(mounted)
