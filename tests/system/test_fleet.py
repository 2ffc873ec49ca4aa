"""A fleet: two ``afi serve`` replicas on one PostgreSQL database and one shared workspace root.

Replica B also has an ``afi ssh`` server and an ``afi mount`` beside it (each its own process, as on a
second machine). A write through replica A is read back through every door of B within a second;
``if_match`` writers on both replicas race and exactly one wins each round; ``kill -9`` of a replica
in the middle of a write loop loses no acknowledged write and leaves no half-written note.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from afi.auth.keys import KeyStore
from afi.clients import HttpClient
from afi.clients.mcp import McpClient
from afi.errors import Conflict
from tests.support.fuse import Mount, afi_mount, needs_fuse
from tests.support.postgres import Databases
from tests.support.servers import AfiServer, start_afi_serve
from tests.support.ssh import OPTS, add_key, keygen, start_afi

ROUNDS = 40  # if_match races, one writer on each replica per round


@dataclass
class Fleet:
    """Replica A (HTTP, MCP), replica B (HTTP, MCP, SSH, a mount), their store and their keys."""

    a: AfiServer
    b: AfiServer
    ssh_port: int
    mount: Mount
    db: str
    root: Path
    token: str
    ssh_key: Path

    def ssh(self, command: str) -> subprocess.CompletedProcess[bytes]:
        cmd = ["ssh", "-p", str(self.ssh_port), "-i", str(self.ssh_key), *OPTS, "127.0.0.1", command]
        return subprocess.run(cmd, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def fleet(postgres_databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    db = postgres_databases.fresh()
    base = tmp_path_factory.mktemp("fleet")
    root = base / "files"
    keys = KeyStore(db)
    token = keys.create(space="default", scopes=("afi:write",), name="fleet")[1]
    key_id = keys.list()[0].id
    ssh_key = keygen(base, "fleet")
    add_key(db, ssh_key.with_suffix(".pub"), api_key=key_id)
    (base / "token").write_text(token + "\n")
    store = ["--db", db, "--root", str(root)]
    with ExitStack() as stack:
        a = stack.enter_context(start_afi_serve(db, root))
        b = stack.enter_context(start_afi_serve(db, root))
        ssh = stack.enter_context(
            start_afi(["ssh", "--port", "0", "--conn-rate", "0", "--cmd-rate", "0", *store], base / "xdg")
        )
        mount = stack.enter_context(afi_mount(base / "mnt", db, root, "--token", str(base / "token")))
        yield Fleet(a, b, ssh["ssh"], mount, db, root, token, ssh_key)
    postgres_databases.drop(db)


def _until(seen: Callable[[], bool], limit: float = 5.0) -> float:
    """Poll ``seen()`` until it is true; return the seconds it took (fails past ``limit``)."""
    start = time.monotonic()
    while not seen():
        if time.monotonic() - start > limit:
            raise AssertionError(f"not seen after {limit} s")
        time.sleep(0.02)
    return time.monotonic() - start


@needs_fuse
def test_a_write_through_one_replica_is_seen_through_every_door_of_the_other(fleet: Fleet) -> None:
    """One fact and one file per round, written through A's HTTP; B's HTTP, MCP, SSH and mount must
    each show them within a second. 5 rounds × 2 paths × 4 doors = 40 reads; the slowest is reported."""
    lags: list[float] = []
    with (
        HttpClient(fleet.a.url, fleet.token) as a,
        HttpClient(fleet.b.url, fleet.token) as b,
        McpClient.http(fleet.b.url + "/mcp", fleet.token) as mcp,
    ):
        for n in range(5):
            for path, text in ((f"/facts/fleet-{n}.md", f"fleet fact {n} canary-{n}"),
                               (f"/files/fleet/{n}.txt", f"fleet file {n} canary-{n}")):  # fmt: skip
                a.write(path, text.encode())
                want = f"canary-{n}"

                def over_http(path: str = path, want: str = want) -> bool:
                    return want in b.read(path).data.decode()

                def over_mcp(path: str = path, want: str = want) -> bool:
                    return want in mcp.read(path).data.decode()

                def over_ssh(path: str = path, want: str = want) -> bool:
                    return want.encode() in fleet.ssh(f"cat {path}").stdout

                def over_mount(path: str = path, want: str = want) -> bool:
                    try:
                        return want in (fleet.mount.path / path.lstrip("/")).read_text()
                    except OSError:
                        return False

                for seen in (over_http, over_mcp, over_ssh, over_mount):
                    lags.append(_until(seen))
    print(f"{len(lags)} reads through B's doors; slowest {max(lags) * 1000:.0f} ms after A acknowledged")
    assert len(lags) == 40
    assert max(lags) <= 1.0, lags


def test_if_match_writers_on_both_replicas_exactly_one_wins(fleet: Fleet) -> None:
    """Each round both replicas get a write with the same If-Match at once: one 200, one conflict."""
    wins = {"a": 0, "b": 0}
    with HttpClient(fleet.a.url, fleet.token) as a, HttpClient(fleet.b.url, fleet.token) as b:
        for n in range(ROUNDS):
            path = f"/facts/race-{n}.md"
            etag = a.write(path, b"start").etag
            assert etag
            barrier = threading.Barrier(2)
            outcome: dict[str, str] = {}

            def race(name: str, client: HttpClient, path: str = path, etag: str = etag,
                     barrier: threading.Barrier = barrier, outcome: dict[str, str] = outcome) -> None:  # fmt: skip
                barrier.wait()
                try:
                    client.write(path, f"written by {name}".encode(), if_match=etag)
                    outcome[name] = "ok"
                except Conflict:
                    outcome[name] = "conflict"

            threads = [threading.Thread(target=race, args=(name, c)) for name, c in (("a", a), ("b", b))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            assert sorted(outcome.values()) == ["conflict", "ok"], (n, outcome)
            winner = next(name for name, result in outcome.items() if result == "ok")
            wins[winner] += 1
            assert b.read(path).data.decode().rstrip().endswith(f"written by {winner}")
    print(f"{ROUNDS} rounds: A won {wins['a']}, B won {wins['b']}, never both, never neither")


def _write_loop(url: str, token: str, prefix: str, stop: threading.Event, acked: dict[str, int]) -> None:
    """Write new versions of five notes and five files until stopped or the replica is gone; record
    each acknowledged version."""
    version = 0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as client:
        while not stop.is_set():
            version += 1
            for path in (f"/facts/{prefix}-{version % 5}.md", f"/files/{prefix}/{version % 5}.txt"):
                body = json.dumps({"path": path, "version": version, "pad": "x" * 2000})
                try:
                    response = client.put("/afi/write", params={"path": path}, content=body.encode())
                except httpx.HTTPError:
                    return  # the replica is gone
                if response.status_code == 200:
                    acked[path] = version


def test_kill_9_of_a_replica_mid_write_loses_nothing_acknowledged(
    postgres_databases: Databases, tmp_path: Path
) -> None:
    """A writer loops on replica X (notes and files, each write a new version of a few paths) and X is
    killed with SIGKILL; replica Y must then hold every acknowledged write whole. Three kills."""
    db = postgres_databases.fresh()
    root = tmp_path / "files"
    token = KeyStore(db).create(space="default", scopes=("afi:write",), name="w")[1]
    acked: dict[str, int] = {}
    total = 0
    with start_afi_serve(db, root) as survivor:
        for kill in range(3):
            with start_afi_serve(db, root) as victim:
                stop = threading.Event()
                writer = threading.Thread(target=_write_loop, args=(victim.url, token, f"k{kill}", stop, acked))
                writer.start()
                time.sleep(1.0 + 0.3 * kill)
                assert victim.process is not None
                os.kill(victim.process.pid, signal.SIGKILL)
                victim.process.wait(10)
                stop.set()
                writer.join(30)
        with HttpClient(survivor.url, token) as client:
            for path, version in acked.items():
                text = client.read(path).data.decode()
                body = text[text.index("{") :] if path.startswith("/facts") else text
                found = json.loads(body)  # a half-written note would not parse
                assert found["path"] == path
                assert found["version"] >= version, (path, found["version"], version)
                total += 1
    postgres_databases.drop(db)
    print(f"3 kills, {total} paths checked at their last acknowledged version, 0 lost, 0 half-written")
    assert total >= 10
