"""Helpers the SSH tests share: a real ``afi ssh`` (or ``afi serve --ssh``) process, key pairs from
``ssh-keygen``, and OpenSSH's ``ssh``/``sftp`` clients driven against it. No test lives here."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.servers import stop_process
from tests.support.warm import AfiPopen

OPTS = [
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "BatchMode=yes",
    "-o",
    "LogLevel=error",
    "-F",
    "/dev/null",
    "-o",
    "IdentityAgent=none",
    "-o",
    "IdentitiesOnly=yes",
]
_ADDRESS = re.compile(r"afi: listening on (ssh|http)://([0-9.]+):(\d+)")


def keygen(folder: Path, name: str) -> Path:
    """Make an Ed25519 key pair with ssh-keygen; return the private key's path (``.pub`` beside it)."""
    key = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key


@dataclass
class SshServer:
    """A running server: where SSH (and HTTP, for ``afi serve --ssh``) listen, its store, its keys."""

    port: int
    db: Path
    root: Path
    keys: dict[str, Path] = field(default_factory=dict)
    http: str | None = None
    process: subprocess.Popen[str] | None = None

    def ssh(self, command: str, key: str = "writer", *, stdin: bytes = b"", timeout: float = 60) -> Run:
        """Run one command line over ``ssh``; return its stdout (bytes), stderr and exit code."""
        cmd = ["ssh", "-p", str(self.port), "-i", str(self.keys[key]), *OPTS, "127.0.0.1", command]
        done = subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)
        return Run(done.stdout, done.stderr.decode("utf-8", "replace"), done.returncode)

    def sftp(self, batch: str, key: str = "writer", *, cwd: Path | None = None) -> Run:
        """Run an ``sftp -b -`` batch; return what it printed and its exit code."""
        cmd = ["sftp", "-P", str(self.port), "-i", str(self.keys[key]), *OPTS, "-b", "-", "127.0.0.1"]
        done = subprocess.run(cmd, input=batch.encode(), capture_output=True, timeout=60, cwd=cwd)
        return Run(done.stdout, done.stderr.decode("utf-8", "replace"), done.returncode)


@dataclass
class Run:
    out: bytes
    err: str
    code: int

    @property
    def text(self) -> str:
        return self.out.decode("utf-8", "replace")


def _pump(stream: object, lines: queue.Queue[str]) -> None:
    for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
        lines.put(line)
    stream.close()  # type: ignore[attr-defined]


@contextmanager
def start_afi(args: list[str], env_home: Path, *, wait_for: int = 1, timeout: float = 60) -> Iterator[dict[str, int]]:
    """Run ``afi <args>``; yield {"ssh": port, "http": port} once it announced ``wait_for`` addresses."""
    env = dict(os.environ, XDG_DATA_HOME=str(env_home))
    cmd = [sys.executable, "-c", "from afi.cli import main; main()", *args]
    proc = AfiPopen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    errors: queue.Queue[str] = queue.Queue()
    readers = [
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, errors), daemon=True),
    ]
    for reader in readers:
        reader.start()
    ports: dict[str, int] = {}
    try:
        deadline = time.monotonic() + timeout
        while len(ports) < wait_for:
            if time.monotonic() > deadline or proc.poll() is not None:
                problems = "".join(errors.get_nowait() for _ in range(errors.qsize()))
                raise RuntimeError(f"afi {' '.join(args)} did not start: {problems}")
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                continue
            found = _ADDRESS.search(line)
            if found:
                ports[found.group(1)] = int(found.group(3))
        yield ports
    finally:
        stop_process(proc)
        for reader in readers:
            reader.join(10)


def add_key(
    db: Path | str,
    public: Path,
    *,
    space: str = "default",
    scopes: tuple[str, ...] = ("afi:read",),
    api_key: str | None = None,
) -> str:
    """Register a public key in the store (as ``afi token ssh add`` does); return its id."""
    from afi.auth.ssh_keys import SshKeyStore

    record = SshKeyStore(db).add(public.read_text(), space=space, scopes=scopes, api_key=api_key)
    return str(record.id)


@contextmanager
def ssh_server(base: Path, *extra: str, keys: bool = True) -> Iterator[SshServer]:
    """A real ``afi ssh --port 0`` over a fresh store, with writer, reader and other-space keys."""
    from afi.auth.keys import KeyStore

    db, root = base / "afi.db", base / "files"
    made: dict[str, Path] = {}
    if keys:
        api = KeyStore(db)
        _, _token = api.create(space="default", scopes=("afi:write",), name="writer-api")
        writer_api = api.list()[0].id
        for name in ("writer", "reader", "other", "stranger"):
            made[name] = keygen(base, name)
        add_key(db, made["writer"].with_suffix(".pub"), api_key=writer_api)
        add_key(db, made["reader"].with_suffix(".pub"), scopes=("afi:read",))
        add_key(db, made["other"].with_suffix(".pub"), space="other", scopes=("afi:write",))
    else:
        made["writer"] = keygen(base, "anyone")
    args = ["ssh", "--port", "0", "--db", str(db), "--root", str(root), *extra]
    with start_afi(args, base / "xdg") as ports:
        yield SshServer(port=ports["ssh"], db=db, root=root, keys=made)
