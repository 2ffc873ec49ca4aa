"""Helpers for the FUSE tests: a real ``afi mount`` in a subprocess, always unmounted afterwards."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.warm import AfiPopen

MOUNTED = "afi: mounted "
AFI = [sys.executable, "-c", "from afi.cli import main; main()"]

needs_fuse = pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse in this sandbox")


@dataclass
class Mount:
    """A running ``afi mount``: where it is, and its process."""

    path: Path
    process: subprocess.Popen[str]
    announced: str
    errors: queue.Queue[str] = field(default_factory=queue.Queue)  # the lines it writes to stderr
    seen: list[str] = field(default_factory=list)  # those read from ``errors`` so far

    def logged(self, text: str, timeout: float = 5.0) -> bool:
        """Whether the mount wrote a line holding ``text`` to stderr (waiting up to ``timeout`` for it)."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.seen):
            try:
                self.seen.append(self.errors.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                return False
        return True


# /proc/self/mountinfo writes a space, tab, newline and backslash in a mount point as \ooo
_OCTAL = re.compile(r"\\([0-7]{3})")


def is_mounted(path: Path) -> bool:
    """Whether something is mounted on ``path``, a stale FUSE mount too (whose daemon is gone: ``stat``
    fails with ENOTCONN there, so ``os.path.ismount`` says False)."""
    target = os.path.abspath(path)
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
        for line in table:
            point = line.split(" ", 5)[4]
            # the kernel escapes a space, tab, newline and backslash as \ooo
            if point.encode().decode("unicode_escape") == target:
                return True
    return False


def wait_unmounted(path: Path, seconds: float = 10.0) -> bool:
    """Wait until nothing is mounted on ``path`` (a killed mount's helper takes it down); False past
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while is_mounted(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def unmount(path: Path) -> None:
    """Take a FUSE mount down, lazily if it is busy; quiet when nothing is mounted."""
    for args in (["fusermount3", "-u", str(path)], ["fusermount3", "-u", "-z", str(path)]):
        if not is_mounted(path):
            return
        subprocess.run(args, capture_output=True, timeout=20)


def _pump(stream: object, lines: queue.Queue[str]) -> None:
    for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
        lines.put(line)


@contextmanager
def afi_mount(mountpoint: Path, db: Path | str, root: Path, *args: str, timeout: float = 60.0) -> Iterator[Mount]:
    """Run ``afi mount --foreground`` over ``db``/``root``; yield once mounted; always unmount."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    cmd = [*AFI, "mount", str(mountpoint), "--db", str(db), "--root", str(root), "--foreground", *args]
    proc = AfiPopen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    errors: queue.Queue[str] = queue.Queue()
    pumps = [
        threading.Thread(target=_pump, args=(s, q), daemon=True)
        for s, q in ((proc.stdout, lines), (proc.stderr, errors))
    ]
    for pump in pumps:
        pump.start()
    try:
        deadline = time.monotonic() + timeout
        announced = ""
        while not announced:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                if proc.poll() is not None:
                    time.sleep(0.2)
                    said = "".join(errors.get_nowait() for _ in range(errors.qsize()))
                    raise RuntimeError(f"afi mount exited with {proc.returncode}: {said}") from None
                if time.monotonic() > deadline:
                    raise RuntimeError("afi mount did not announce itself") from None
                continue
            if line.startswith(MOUNTED):
                announced = line
        yield Mount(mountpoint, proc, announced, errors)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        unmount(mountpoint)
        for pump in pumps:
            pump.join(5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
