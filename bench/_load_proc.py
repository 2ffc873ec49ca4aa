"""The load bench's servers: an ``afi serve`` subprocess, and its memory, descriptors and CPU from ``/proc``."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

__all__ = ["Server", "server_resources", "workers_supported"]

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT = 120.0
_LISTENING = "afi: listening on "


def _afi(*args: str) -> list[str]:
    return [sys.executable, "-c", "from afi.cli import main; main()", *args]


def workers_supported() -> bool:
    """Whether ``afi serve`` has a ``--workers`` option (read from its ``--help``)."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run(_afi("serve", "--help"), capture_output=True, text=True, timeout=60, env=env, check=False)
    return "--workers" in done.stdout


def _pump(stream: Any, lines: queue.Queue[str], keep: list[str]) -> None:
    for line in iter(stream.readline, ""):
        lines.put(line)
        keep.append(line)
        del keep[:-200]
    stream.close()


@dataclass
class Server:
    """One ``afi serve`` subprocess and its address."""

    name: str
    argv: list[str]
    proc: subprocess.Popen[str]
    url: str = ""
    log: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, name: str, db: Path, root: Path, extra: Sequence[str]) -> Server:
        """Run ``afi serve --port 0`` over db/root with ``extra`` options; return it once it answers."""
        argv = _afi("serve", "--host", "127.0.0.1", "--port", "0", "--db", str(db), "--root", str(root), *extra)
        return cls._launch(name, argv)

    @classmethod
    def floor(cls, name: str, extra: Sequence[str]) -> Server:
        """Run the floor (``bench/_load_floor.py``: a bare Starlette app, served as ``afi serve`` is) with
        ``extra`` options (``--workers N``); return it once it answers."""
        return cls._launch(name, [sys.executable, "-m", "bench._load_floor", *extra])

    @classmethod
    def _launch(cls, name: str, argv: list[str]) -> Server:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
        server = cls(name, argv, proc)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stdout, lines, server.log), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while not server.url:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{name}: afi serve did not start: {''.join(server.log)[-2000:]}")
                try:
                    line = lines.get(timeout=0.2)
                except queue.Empty:
                    continue
                if line.startswith(_LISTENING):
                    server.url = line[len(_LISTENING) :].split()[0]
            while True:
                try:
                    if _every_worker_answers(server.url):
                        return server
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{name}: afi serve did not answer: {''.join(server.log)[-2000:]}")
                time.sleep(0.1)
        except BaseException:
            server.stop()
            raise

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 15 s)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _every_worker_answers(url: str, tries: int = 16) -> bool:
    """Whether ``tries`` fresh connections at once each get the manifest: the kernel spreads new
    connections over the workers' sockets, and a worker still starting holds its callers until it is up."""

    def one() -> bool:
        try:
            return httpx.get(url + "/.afi/manifest.json", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    with ThreadPoolExecutor(tries) as pool:
        return all(pool.map(lambda _: one(), range(tries)))


def _process_tree(root: int) -> list[int]:
    """The pid and every live descendant of it (from each process's parent in ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _established(port: int) -> set[int]:
    """The socket inodes of the established TCP connections whose local port is ``port``."""
    found: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(int(fields[9]))
    return found


def server_resources(pid: int, port: int | None = None) -> dict[str, Any]:
    """Resident memory, open descriptors and CPU seconds of a process and its descendants, summed; with
    ``port``, also how many established connections to it each process holds (keep-alive clients stick
    to the worker that accepted them)."""
    rss_kb = pss_kb = anon_kb = fds = 0
    cpu = 0.0
    pids = []
    connections: list[int] = []
    sockets = _established(port) if port is not None else set()
    tick = os.sysconf("SC_CLK_TCK")
    for each in _process_tree(pid):
        try:
            status = Path(f"/proc/{each}/status").read_text()
            rollup = Path(f"/proc/{each}/smaps_rollup").read_text()
            links = [os.readlink(f"/proc/{each}/fd/{fd}") for fd in os.listdir(f"/proc/{each}/fd")]
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile (or a descriptor closed while it was read)
            continue
        rss_kb += _field_kb(status, "VmRSS:")
        anon_kb += _field_kb(status, "RssAnon:")
        pss_kb += _field_kb(rollup, "Pss:")
        fds += len(links)
        cpu += (int(fields[11]) + int(fields[12])) / tick
        pids.append(each)
        if port is not None:
            connections.append(sum(1 for link in links if link.startswith("socket:[") and int(link[8:-1]) in sockets))
    out: dict[str, Any] = {
        "rss_mb": rss_kb / 1024,
        "pss_mb": pss_kb / 1024,
        "anon_mb": anon_kb / 1024,
        "fds": fds,
        "processes": len(pids),
        "cpu_seconds": cpu,
    }
    if port is not None:
        out["connections_by_process"] = sorted((c for c in connections if c), reverse=True)
    return out


def _field_kb(text: str, name: str) -> int:
    """The kB figure of one ``Name:  1234 kB`` line of a /proc file (0 when absent)."""
    return next((int(line.split()[1]) for line in text.splitlines() if line.startswith(name)), 0)
