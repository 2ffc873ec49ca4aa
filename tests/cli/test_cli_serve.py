"""``afi serve``, ``afi token`` and ``afi conformance``, run as a user runs them (subprocesses)."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from afi.auth.keys import KeyStore
from afi.commands.serve import is_loopback
from tests.support.servers import AfiServer, start_afi_serve


def afi(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "from afi.cli import main; main()", *args]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_serve_refuses_a_public_address_without_keys(tmp_path: Path, host: str) -> None:
    result = afi("serve", "--host", host, "--port", "0", "--db", str(tmp_path / "afi.db"), "--root", str(tmp_path))
    assert result.returncode == 2
    assert "refusing to listen" in result.stderr and "afi token create" in result.stderr


def test_serve_announces_where_it_listens(afi_serve_process: AfiServer) -> None:
    """The HTTP door's smoke test through the command: it starts, says where it listens, and answers."""
    assert afi_serve_process.url.startswith("http://127.0.0.1:")
    assert not afi_serve_process.url.endswith(":0")
    manifest = httpx.get(afi_serve_process.url + "/.afi/manifest.json")
    assert manifest.status_code == 200 and manifest.json()["provider"] == "afi-memory", manifest.text


def test_token_create_list_revoke(tmp_path: Path) -> None:
    db = str(tmp_path / "afi.db")
    created = afi(
        "token", "create", "--scope", "afi:read", "--scope", "afi:write", "--space", "team", "--name", "ci", "--db", db
    )
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("afi_") and "\n" not in token
    (record,) = KeyStore(db).list()
    assert KeyStore(db).verify(token) is not None
    assert record.id in created.stderr and "shown only now" in created.stderr
    listed = afi("token", "list", "--db", db)
    assert listed.returncode == 0
    assert record.id in listed.stdout and "team" in listed.stdout and "ci" in listed.stdout
    assert token not in listed.stdout and token[4:20] not in listed.stdout
    assert afi("token", "revoke", record.id, "--db", db).returncode == 0
    assert KeyStore(db).verify(token) is None
    again = afi("token", "revoke", record.id, "--db", db)
    assert again.returncode == 2 and "not_found" in again.stderr


def test_token_create_refuses_an_unknown_scope(tmp_path: Path) -> None:
    db = str(tmp_path / "afi.db")
    result = afi("token", "create", "--scope", "afi:root", "--db", db)
    assert result.returncode == 2
    assert "invalid_path" in result.stderr and "unknown scope 'afi:root'" in result.stderr
    assert result.stdout == ""
    assert KeyStore(db).count() == 0


def test_conformance_command_passes_with_a_json_report(afi_server: AfiServer) -> None:
    result = afi(
        "conformance",
        afi_server.url,
        "--token",
        afi_server.tokens["writer"],
        "--other-token",
        afi_server.tokens["other"],
        "--json",
    )
    assert result.returncode == 0, result.stdout[-3000:]
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["totals"]["fail"] == 0 and report["totals"]["pass"] >= 70


def test_conformance_command_exits_1_on_failure(afi_server: AfiServer) -> None:
    result = afi("conformance", afi_server.url, "--token", afi_server.tokens["reader"], "--only", "write.create")
    assert result.returncode == 1
    assert "fail" in result.stdout and "forbidden" in result.stdout


@pytest.mark.parametrize("command", [["serve"], ["token"], ["token", "create"], ["conformance"]])
def test_every_command_has_help(command: list[str]) -> None:
    result = afi(*command, "--help")
    assert result.returncode == 0
    assert "Usage" in result.stdout


# -- limits: header and body timeouts, the connection cap ------------------------------------

HALF_A_HEADER = b"GET /afi/list?path=/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: "


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _address(server: AfiServer) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _until_closed(sock: socket.socket, timeout: float) -> bytes:
    """Read until the server closes the connection; return what it sent."""
    sock.settimeout(timeout)
    chunks = []
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _raise_descriptor_limit(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"the descriptor limit ({hard}) is below the {wanted} this test needs")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))  # the server inherits it


def test_half_open_connections_are_closed_within_the_header_timeout(tmp_path: Path) -> None:
    _raise_descriptor_limit(4096)
    args = ("--header-timeout", "2", "--max-connections", "2000")
    with start_afi_serve(tmp_path / "afi.db", tmp_path / "files", *args) as server:
        assert server.process is not None
        pid, address = server.process.pid, _address(server)
        before = _descriptors(pid)
        sockets = []
        try:
            opened = time.monotonic()
            for _ in range(1000):
                sock = socket.create_connection(address)
                sock.sendall(HALF_A_HEADER)
                sockets.append(sock)
            deadline, held = time.monotonic() + 1.5, 0
            while time.monotonic() < deadline and held < before + 1000:
                held = max(held, _descriptors(pid))
                time.sleep(0.05)
            assert held >= before + 950, f"the server held {held - before} of the 1000 connections"
            answered = httpx.get(server.url + "/afi/list", params={"path": "/"}, timeout=5)
            assert answered.status_code == 200
            answers = [_until_closed(sock, 10) for sock in sockets]
            closed_after = time.monotonic() - opened
        finally:
            for sock in sockets:
                sock.close()
        assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers)
        assert json.loads(answers[0].partition(b"\r\n\r\n")[2])["error"]["code"] == "invalid_path"
        assert closed_after < 2 + 3, f"the last half-open connection was closed after {closed_after:.1f} s"
        deadline, after = time.monotonic() + 5, _descriptors(pid)
        while after > before + 5 and time.monotonic() < deadline:
            time.sleep(0.1)
            after = _descriptors(pid)
        print(f"server descriptors: {before} at start, {held} with 1000 half-open connections, {after} after;")
        print(f"every one answered 408 and closed {closed_after:.1f} s after the first was opened")
        assert after <= before + 5


def test_a_connection_over_the_cap_is_answered_503_at_once(tmp_path: Path) -> None:
    args = ("--header-timeout", "30", "--max-connections", "20")
    with start_afi_serve(tmp_path / "afi.db", tmp_path / "files", *args) as server:
        assert server.process is not None
        pid, address = server.process.pid, _address(server)
        before = _descriptors(pid)
        held = [socket.create_connection(address) for _ in range(20)]
        try:
            time.sleep(0.5)
            over = [socket.create_connection(address) for _ in range(30)]
            answers = [_until_closed(sock, 5) for sock in over]
            for sock in over:
                sock.close()
            assert _descriptors(pid) <= before + 20 + 2
        finally:
            for sock in held:
                sock.close()
        assert all(answer.startswith(b"HTTP/1.1 503 ") for answer in answers)
        head, _, body = answers[0].partition(b"\r\n\r\n")
        assert b"retry-after: 1" in head.lower() and json.loads(body)["error"]["code"] == "rate_limited"
        time.sleep(0.3)
        assert httpx.get(server.url + "/afi/list", params={"path": "/"}, timeout=5).status_code == 200


def test_a_body_is_cut_when_it_pauses_longer_than_the_body_timeout(tmp_path: Path) -> None:
    head = b"PUT /afi/write?path=/files/slow.txt HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    head += b"Content-Length: 4\r\n\r\n"
    with start_afi_serve(tmp_path / "afi.db", tmp_path / "files", "--body-timeout", "1") as server:
        with socket.create_connection(_address(server)) as slow:
            slow.sendall(head)
            for byte in b"abcd":  # a pause shorter than the timeout restarts it: 4 x 0.4 s > 1 s in all
                time.sleep(0.4)
                slow.sendall(bytes([byte]))
            assert _until_closed(slow, 5).startswith(b"HTTP/1.1 200 ")
        with socket.create_connection(_address(server)) as stalled:
            stalled.sendall(head + b"ab")
            started = time.monotonic()
            assert _until_closed(stalled, 10) == b""
            assert 0.8 < time.monotonic() - started < 4
        read = httpx.get(server.url + "/afi/read", params={"path": "/files/slow.txt"})
        assert read.content == b"abcd"


# -- workers ---------------------------------------------------------------------------------


def _workers_of(pid: int) -> list[int]:
    """The pids of uvicorn's worker processes under ``pid`` (multiprocessing also starts a resource tracker)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == pid and b"spawn_main" in cmdline:
            found.append(int(entry))
    return found


def test_two_workers_are_two_processes_over_one_store(tmp_path: Path) -> None:
    with start_afi_serve(tmp_path / "afi.db", tmp_path / "files", "--workers", "2") as server:
        assert server.process is not None
        workers = _workers_of(server.process.pid)
        assert len(workers) == 2 and server.process.pid not in workers
        for n in range(12):  # a fresh connection each: either worker may take it
            put = httpx.put(server.url + "/afi/write", params={"path": f"/files/w{n}.txt"}, content=b"x%d" % n)
            assert put.status_code == 200, put.text
        for _ in range(6):
            listing = httpx.get(server.url + "/afi/list", params={"path": "/files"}).json()
            assert {e["path"] for e in listing["entries"]} == {f"/files/w{n}.txt" for n in range(12)}
        accept = {"Accept": "application/json, text/event-stream"}
        tools_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        listed = httpx.post(server.url + "/mcp", json=tools_list, headers=accept)
        assert listed.status_code == 200 and listed.json()["result"]["tools"]  # stateless: no initialize first
        assert _workers_of(server.process.pid) == workers


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--ssh"], "--ssh runs in one process"), (["--mcp-stateful"], "--mcp-stateful needs --workers 1")],
)
def test_workers_refuse_what_needs_one_process(tmp_path: Path, extra: list[str], message: str) -> None:
    db, root = str(tmp_path / "afi.db"), str(tmp_path / "files")
    result = afi("serve", "--port", "0", "--workers", "2", "--db", db, "--root", root, *extra)
    assert result.returncode == 2
    assert message in result.stderr


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, dead but not yet reaped, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_workers_end_when_their_supervisor_is_killed(tmp_path: Path) -> None:
    with start_afi_serve(tmp_path / "afi.db", tmp_path / "files", "--workers", "2") as server:
        assert server.process is not None
        workers = _workers_of(server.process.pid)
        assert len(workers) == 2
        server.process.kill()  # kill -9: the supervisor gets no chance to stop them
        server.process.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_running(pid) for pid in workers):
            time.sleep(0.1)
        left = [pid for pid in workers if _running(pid)]
        for pid in left:  # leave no orphan behind this test, whatever it found
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        assert not left, f"{len(left)} of 2 workers still run after their supervisor was killed"
        with pytest.raises(httpx.TransportError):
            httpx.get(server.url + "/.afi/manifest.json", timeout=2)


_SLOW_WORKER_START = """\
import sys, time
if "--multiprocessing-fork" in sys.argv and "spawn_main" in open("/proc/self/cmdline", "rb").read().decode():
    time.sleep(float(__import__("os").environ["AFI_TEST_WORKER_DELAY"]))
"""


def test_workers_that_take_longer_than_five_seconds_to_start_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a busy machine a worker's imports took 12 s; uvicorn's health check killed every worker that
    had not answered within 5 s and spawned another, for ever, and --workers never served. A
    sitecustomize delays each worker's start by 7 s here: both workers still serve, and are the first
    two (none was killed and spawned again)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SLOW_WORKER_START)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("AFI_TEST_WORKER_DELAY", "7")
    with start_afi_serve(tmp_path / "afi.db", tmp_path / "files", "--workers", "2", timeout=90) as server:
        assert server.process is not None
        first = _workers_of(server.process.pid)
        for _ in range(16):  # a fresh connection each: the kernel spreads them over both workers' sockets
            assert httpx.get(server.url + "/.afi/manifest.json", timeout=30).status_code == 200
        assert len(first) == 2 and _workers_of(server.process.pid) == first, "no worker was killed and replaced"
