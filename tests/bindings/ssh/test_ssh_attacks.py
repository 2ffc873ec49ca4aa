"""Issue 11 through the SSH door: hostile shell lines, SFTP requests and JSON-RPC, and never an internal error.

One ``afi ssh`` (connection and command limits off) and one asyncssh connection take a deterministic
corpus: 1,000+ command lines run one per channel (hostile paths, grep patterns, find expressions,
redirections, unknown flags, long lines, binary input), lines with bytes that are not UTF-8 typed
into an interactive shell, SFTP requests with hostile paths, offsets and sizes, and lines of hostile
JSON-RPC to the ``afi`` subsystem. No answer may carry the ``internal`` code or end a session without
an exit status; each answers within a deadline, and a normal command works at the end on a new
connection. Regex bombs (``grep -E``) run last, against a bait line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

import asyncssh
import pytest

from afi.errors import ERROR_CODES
from tests.support.hostile import BOMB_BAIT, REGEX_BOMBS, Tally
from tests.support.hostile_ssh import interactive_lines, rpc_lines, sftp_cases, shell_cases
from tests.support.ssh import SshServer, ssh_server

SEED = 11
CASES = 1000
DEADLINE = 20.0  # seconds one command or request may take before it counts as a hang
MAX_FILE = "16M"
INTERNAL = re.compile(r"(^|\n)afi: (.*: )?internal: ")
AFI_CODES = [code for code in ERROR_CODES if code != "internal"]


# -- the server and the connection --------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """One ``afi ssh`` for the module, without connection or command limits, with a 16 MiB per-file cap."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AFI_MAX_FILE_SIZE", MAX_FILE)
        base = tmp_path_factory.mktemp("ssh-attacks")
        with ssh_server(base, "--conn-rate", "0", "--cmd-rate", "0") as running:
            yield running


async def connect(server: SshServer) -> asyncssh.SSHClientConnection:
    key = asyncssh.read_private_key(str(server.keys["writer"]))
    return await asyncssh.connect(
        "127.0.0.1", port=server.port, client_keys=[key], known_hosts=None, username="fuzz", keepalive_interval=0
    )


async def seed(conn: asyncssh.SSHClientConnection) -> None:
    done = await conn.run("cat > /files/bait.txt", input=f"{BOMB_BAIT}\nsome text\n", timeout=DEADLINE)
    assert done.exit_status == 0, done.stderr
    done = await conn.run("echo 'a fact about aaaa' > /facts/seed.md", timeout=DEADLINE)
    assert done.exit_status == 0, done.stderr


async def run_line(conn: asyncssh.SSHClientConnection, line: str, feed: bytes) -> asyncssh.SSHCompletedProcess:
    """Run one command line with ``feed`` as its input; a command that ends before reading it all is fine."""
    process = await conn.create_process(line, encoding=None, stdin=asyncssh.PIPE if feed else asyncssh.DEVNULL)
    async with process:
        if feed:
            with contextlib.suppress(BrokenPipeError, asyncssh.Error):
                process.stdin.write(feed)
                process.stdin.write_eof()
        return await process.wait(timeout=DEADLINE)


def judge_run(status: int | None, stderr: str) -> str | None:
    """Given a command's exit status and stderr, return why it is a failure (None: an answer or an AFI error)."""
    if INTERNAL.search(stderr):
        return f"internal error: {stderr[-300:]!r}"
    if status not in (0, 1, 2):
        return f"exit status {status}: {stderr[-300:]!r}"
    return None


async def alive(server: SshServer) -> None:
    """A new connection still gets in, and a write and a read still work."""
    async with await connect(server) as conn:
        wrote = await conn.run("echo still here > /files/after.txt", timeout=DEADLINE)
        assert wrote.exit_status == 0, wrote.stderr
        read = await conn.run("cat /files/after.txt", timeout=DEADLINE)
        assert (read.exit_status, read.stdout) == (0, "still here\n"), read.stderr


# -- the tests -----------------------------------------------------------------------------------


def test_hostile_shell_lines(server: SshServer) -> None:
    tally = Tally("SSH shell lines")
    cases = shell_cases(SEED, CASES)

    async def body() -> None:
        async with await connect(server) as conn:
            await seed(conn)
            for line, feed in cases:
                tally.tried += 1
                try:
                    done = await run_line(conn, line, feed)
                except asyncssh.TimeoutError:
                    tally.fail((line, feed), f"no answer in {DEADLINE} s")
                    continue
                except (asyncssh.Error, OSError) as err:
                    tally.fail((line, feed), f"{type(err).__name__}: {err}")
                    continue
                stderr = done.stderr.decode("utf-8", "replace") if isinstance(done.stderr, bytes) else ""
                why = judge_run(done.exit_status, stderr)
                if why is not None:
                    tally.fail((line, feed), why)
        await alive(server)

    asyncio.run(body())
    print(tally.report())
    assert tally.tried >= CASES
    assert not tally.failures, tally.report()


PROMPT = re.compile(rb"afi:[^\n]*\$ $")


async def _until_prompt(process: asyncssh.SSHClientProcess[bytes]) -> bytes:
    seen = b""
    while not PROMPT.search(seen):
        chunk = await process.stdout.read(65536)
        if not chunk:
            raise ConnectionError(f"the interactive shell ended: {seen[-300:]!r}")
        seen += chunk
    return seen


def test_bytes_that_are_not_utf8_at_the_interactive_prompt(server: SshServer) -> None:
    tally = Tally("SSH interactive lines")
    lines = interactive_lines(SEED + 1, 300)
    errors: list[bytes] = []

    async def drain(process: asyncssh.SSHClientProcess[bytes]) -> None:
        while chunk := await process.stderr.read(65536):
            errors.append(chunk)

    async def said() -> str:
        # A command's stderr comes before the next prompt on the same channel; let the drain catch up with it.
        for _ in range(3):
            await asyncio.sleep(0)
        out = b"".join(errors).decode("utf-8", "replace")
        errors.clear()
        return out

    async def body() -> None:
        async with await connect(server) as conn:
            process = await conn.create_process(encoding=None)
            reader = asyncio.create_task(drain(process))
            await asyncio.wait_for(_until_prompt(process), DEADLINE)
            for line in lines:
                tally.tried += 1
                process.stdin.write(line + b"\n")
                try:
                    await asyncio.wait_for(_until_prompt(process), DEADLINE)
                except (TimeoutError, ConnectionError) as err:
                    tally.fail(line, f"no prompt again: {err}")
                    break
                if INTERNAL.search(await said()):
                    tally.fail(line, "internal error")
            process.stdin.write(b"exit\n")
            await asyncio.wait_for(process.wait_closed(), DEADLINE)
            await reader
            if INTERNAL.search(await said()):
                tally.fail("(the session's last words)", "internal error")
        await alive(server)

    asyncio.run(body())
    print(tally.report())
    assert tally.tried >= 300
    assert not tally.failures, tally.report()


# -- SFTP ---------------------------------------------------------------------------------------


async def sftp_call(sftp: asyncssh.SFTPClient, op: str, args: tuple[Any, ...]) -> None:
    """Run one SFTP operation (file operations open, act and close their own handle)."""
    if op in ("read", "write", "resize", "fsync"):
        path, flags = args[0], args[1] if len(args) > 2 else asyncssh.FXF_WRITE | asyncssh.FXF_CREAT
        file = await sftp.open(path, flags, encoding=None)
        try:
            if op == "read":
                await file.read(args[3], args[2])
            elif op == "write":
                await file.write(b"x", args[2])
            elif op == "resize":
                await file.truncate(args[1])
            else:
                await file.fsync()
        finally:
            await file.close()
        return
    if op == "utime":
        await sftp.utime(args[0], (0, 2**32 - 1))
    elif op == "chmod":
        await sftp.chmod(args[0], 0o7777)
    else:
        await getattr(sftp, op)(*args)


def judge_sftp(err: asyncssh.SFTPError) -> str | None:
    """Given an SFTP error, return why it is a failure (None: a status that says what was refused)."""
    reason = str(err.reason)
    if "internal:" in reason or "Uncaught exception" in reason:
        return f"SFTP {type(err).__name__}: {reason[:300]!r}"
    if err.code == asyncssh.FX_FAILURE and not any(f"{code}:" in reason for code in AFI_CODES):
        return f"SFTP failure without an AFI error: {reason[:300]!r}"
    return None


def test_hostile_sftp_requests(server: SshServer) -> None:
    tally = Tally("SSH SFTP requests")
    cases = sftp_cases(SEED + 2, CASES)

    async def body() -> None:
        async with await connect(server) as conn:
            await seed(conn)
            async with conn.start_sftp_client() as sftp:
                for op, args in cases:
                    tally.tried += 1
                    try:
                        await asyncio.wait_for(sftp_call(sftp, op, args), DEADLINE)
                    except asyncssh.SFTPError as err:
                        why = judge_sftp(err)
                        if why is not None:
                            tally.fail((op, args), why)
                    except TimeoutError:
                        tally.fail((op, args), f"no answer in {DEADLINE} s")
                    except (asyncssh.Error, OSError) as err:
                        tally.fail((op, args), f"{type(err).__name__}: {err}")
                        break
        await alive(server)

    asyncio.run(body())
    print(tally.report())
    assert tally.tried >= CASES
    assert not tally.failures, tally.report()


# -- the afi JSON-RPC subsystem -------------------------------------------------------------------


async def _rpc_answers(process: asyncssh.SSHClientProcess[bytes], sync: str) -> list[Any]:
    answers: list[Any] = []
    while True:
        line = await process.stdout.readline()
        if not line:
            raise ConnectionError("the afi subsystem ended")
        try:
            answer = json.loads(line)
        except ValueError:
            answer = {"not json": line[:200].decode("utf-8", "replace")}
        answers.append(answer)
        if isinstance(answer, dict) and answer.get("id") == sync:
            return answers


def judge_rpc(answer: Any) -> str | None:
    """Given one answer line of the ``afi`` subsystem, return why it is a failure (None: a result or an AFI error)."""
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0":
        return f"not a JSON-RPC answer: {answer!r:.300}"
    error = answer.get("error")
    if isinstance(error, dict):
        data = error.get("data")
        if (isinstance(data, dict) and data.get("code") == "internal") or error.get("code") == -32603:
            return f"internal error: {error!r:.300}"
    return None


def test_hostile_json_rpc_to_the_afi_subsystem(server: SshServer) -> None:
    tally = Tally("SSH afi subsystem lines")
    lines = rpc_lines(SEED + 3, CASES)

    async def body() -> None:
        async with await connect(server) as conn:
            process = await conn.create_process(subsystem="afi", encoding=None)
            for number, line in enumerate(lines):
                tally.tried += 1
                sync = f"sync-{number}"
                process.stdin.write(line + b"\n")
                check = {"jsonrpc": "2.0", "id": sync, "method": "stat", "params": {"path": "/"}}
                process.stdin.write(json.dumps(check).encode() + b"\n")
                try:
                    answers = await asyncio.wait_for(_rpc_answers(process, sync), DEADLINE)
                except (TimeoutError, ConnectionError, asyncssh.Error) as err:
                    tally.fail(line, f"no answer: {type(err).__name__} {err}")
                    break
                for answer in answers:
                    why = judge_rpc(answer)
                    if why is not None:
                        tally.fail(line, why)
            process.stdin.write_eof()
            await asyncio.wait_for(process.wait_closed(), DEADLINE)
        await alive(server)

    asyncio.run(body())
    print(tally.report())
    assert tally.tried >= CASES
    assert not tally.failures, tally.report()


BOMB_SECONDS = 10.0


def test_regex_bombs_answer_in_seconds(server: SshServer) -> None:
    """Last in the module: a bomb that hangs the server leaves it wedged, so the first hang ends the test."""
    tally = Tally("SSH regex bombs")

    async def body() -> None:
        async with await connect(server) as conn:
            await seed(conn)
            for bomb in REGEX_BOMBS:
                pattern = "'" + bomb + "'"  # no bomb holds a single quote
                for line, feed in (
                    (f"grep -E {pattern} /files/bait.txt", b""),
                    (f"grep -rcE {pattern} /", b""),
                    (f"grep -E {pattern}", f"{BOMB_BAIT}\n".encode() * 3),
                    (f"cat /files/bait.txt | grep -iE {pattern}", b""),
                ):
                    tally.tried += 1
                    try:
                        done = await asyncio.wait_for(run_line(conn, line, feed), BOMB_SECONDS)
                    except TimeoutError:
                        tally.fail(line, f"no answer in {BOMB_SECONDS} s: the server is stuck on it")
                        return
                    stderr = done.stderr.decode("utf-8", "replace") if isinstance(done.stderr, bytes) else ""
                    why = judge_run(done.exit_status, stderr)
                    if why is not None:
                        tally.fail(line, why)
        await alive(server)

    asyncio.run(body())
    print(tally.report())
    assert not tally.failures, tally.report()
