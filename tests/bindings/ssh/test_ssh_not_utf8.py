"""Names that are not UTF-8 through the SSH door: refused as ``invalid_path``, never stored under another name.

SSH carries bytes: a command line, an SFTP file name, a line of the ``afi`` JSON-RPC subsystem. A
byte that is not UTF-8 reaches the verbs as a lone surrogate (``surrogateescape``), which
:func:`afi.paths.normalize` refuses; no door may turn it into U+FFFD and store a name the client
never sent. Each case goes through the real door (OpenSSH's ``ssh`` with a byte argument, asyncssh's
SFTP client with byte names, the subsystem with a raw line); the workspace is checked after each.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import asyncssh

from tests.support.hostile import BAD_UTF8, Tally
from tests.support.ssh import OPTS, SshServer


def _stored(ssh_served: SshServer) -> set[str]:
    folder = ssh_served.root / "default"
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")} if folder.exists() else set()


def _ssh_bytes(ssh_served: SshServer, line: bytes) -> tuple[int, str]:
    cmd = [b"ssh", b"-p", str(ssh_served.port).encode(), b"-i", str(ssh_served.keys["writer"]).encode()]
    cmd += [o.encode() for o in OPTS] + [b"127.0.0.1", line]
    done = subprocess.run(cmd, capture_output=True, timeout=60)
    return done.returncode, done.stderr.decode("utf-8", "replace")


def _lines() -> list[bytes]:
    lines = []
    for bad in BAD_UTF8:
        name = b"/files/bad" + bad + b".txt"
        lines += [b"echo hi > " + name, b"mkdir " + name, b"cp /files/seed.txt " + name, b"mv /files/seed.txt " + name]
    return lines


def test_shell_commands_with_names_that_are_not_utf8_store_nothing(ssh_served: SshServer) -> None:
    """``ssh host 'echo hi > bad\\xff'``: asyncssh refuses an exec request that is not UTF-8 before the
    shell sees it (``exec request failed``); typed at the interactive shell, each line is ``invalid_path``."""
    tally = Tally("SSH command lines with bytes that are not UTF-8")
    assert _ssh_bytes(ssh_served, b"echo seed > /files/seed.txt")[0] == 0
    before = _stored(ssh_served)
    for line in _lines():
        tally.tried += 1
        code, err = _ssh_bytes(ssh_served, line)
        if code == 0:
            tally.fail(line, f"exit 0: {err[-200:]!r}")

    async def interactive() -> str:
        key = asyncssh.read_private_key(str(ssh_served.keys["writer"]))
        async with asyncssh.connect(
            "127.0.0.1", port=ssh_served.port, client_keys=[key], known_hosts=None, username="t"
        ) as conn:
            process = await conn.create_process(encoding=None)
            process.stdin.write(b"".join(line + b"\n" for line in _lines()) + b"exit\n")
            done = await process.wait(timeout=60)
            return (done.stderr or b"").decode("utf-8", "replace")

    said = asyncio.run(interactive())
    tally.tried += len(_lines())
    refused = [line for line in said.splitlines() if "invalid_path" in line and "UTF-8" in line]
    if len(refused) != len(_lines()):
        tally.fail("the interactive shell", f"{len(refused)} of {len(_lines())} lines refused: {said[-600:]!r}")
    if _stored(ssh_served) != before:
        tally.fail("the workspace", f"new names: {sorted(_stored(ssh_served) - before)!r}")
    print(tally.report())
    assert not tally.failures, tally.report()


async def _sftp_cases(ssh_served: SshServer, tally: Tally) -> None:
    key = asyncssh.read_private_key(str(ssh_served.keys["writer"]))
    async with (
        asyncssh.connect("127.0.0.1", port=ssh_served.port, client_keys=[key], known_hosts=None, username="t") as conn,
        conn.start_sftp_client() as sftp,
    ):
        async with sftp.open("/files/source.txt", "wb") as made:
            await made.write(b"source")
        for bad in BAD_UTF8:
            name = b"/files/sftp" + bad + b".txt"
            for op in ("put", "mkdir", "rename", "posix_rename", "stat", "remove"):
                tally.tried += 1
                try:
                    if op == "put":
                        async with sftp.open(name, "wb") as file:
                            await file.write(b"x")
                    elif op in ("rename", "posix_rename"):
                        await getattr(sftp, op)(b"/files/source.txt", name)
                    else:
                        await getattr(sftp, op)(name)
                except asyncssh.SFTPError as err:
                    if "invalid_path" not in str(err.reason) or "UTF-8" not in str(err.reason):
                        tally.fail((op, name), f"refused without saying why: {err.reason!r}")
                else:
                    tally.fail((op, name), "accepted")


def test_sftp_names_that_are_not_utf8_are_invalid_path(ssh_served: SshServer) -> None:
    tally = Tally("SFTP names that are not UTF-8")
    asyncio.run(_sftp_cases(ssh_served, tally))
    stored = _stored(ssh_served)
    if not {"source.txt"} <= stored or any(name.startswith("sftp") for name in stored):
        tally.fail("the workspace", f"holds {sorted(stored)!r}")
    print(tally.report())
    assert not tally.failures, tally.report()


def test_the_afi_subsystem_refuses_a_line_with_a_name_that_is_not_utf8(ssh_served: SshServer) -> None:
    async def body() -> list[dict[str, object]]:
        key = asyncssh.read_private_key(str(ssh_served.keys["writer"]))
        async with asyncssh.connect(
            "127.0.0.1", port=ssh_served.port, client_keys=[key], known_hosts=None, username="t"
        ) as conn:
            process = await conn.create_process(subsystem="afi", encoding=None)
            answers = []
            for i, bad in enumerate(BAD_UTF8):
                request = {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "write",
                    "params": {"path": "/files/rpcBAD", "data": "x"},
                }
                process.stdin.write(json.dumps(request).encode().replace(b"BAD", bad) + b"\n")
                answers.append(json.loads(await process.stdout.readline()))
            process.stdin.write_eof()
            return answers

    answers = asyncio.run(body())
    refused = [a for a in answers if "error" in a and "result" not in a]
    assert len(refused) == len(BAD_UTF8), answers
    assert not any(name.startswith("rpc") for name in _stored(ssh_served)), _stored(ssh_served)
    assert all("UTF-8" in str(a["error"]) for a in refused), refused


def test_a_refused_name_leaves_the_others(ssh_served: SshServer, tmp_path: Path) -> None:
    """The control: the same door stores a UTF-8 name that is not ASCII as it was sent."""
    assert _ssh_bytes(ssh_served, "echo hi > /files/café.txt".encode())[0] == 0
    assert "café.txt" in _stored(ssh_served)
