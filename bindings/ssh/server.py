"""The SSH binding (docs/afi.md, "SSH"): a sandboxed shell, SFTP and an ``afi`` JSON-RPC subsystem, on asyncssh.

``ssh host grep -r canary /`` runs one command line of the shell in :mod:`.ssh_shell` (never a
real shell, never the host filesystem); ``ssh host`` with a terminal is an interactive shell with
line editing and history; ``sftp`` is :mod:`.ssh_sftp`; ``ssh -s host afi`` is :mod:`.ssh_rpc`.
Keys map to callers through a verifier the caller of :func:`start_ssh_server` supplies (the
provider's key stores and an authorized-keys file). Limits: failed logins per minute per address
(a connection that logs in costs nothing; over the limit, new connections are told why and closed),
commands per minute per session, output per command.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from afi.auth.door import is_loopback_host
from afi.auth.ratelimit import RateLimiter
from afi.errors import AfiError, Internal, RateLimited, TooLarge, Unsupported
from afi.provider import Caller, Provider

from .base import error_line, no_input
from .codec import ENCODING, heal
from .rpc import RpcEndpoint
from .sftp import DEFAULT_MAX_UPLOAD, AfiSFTPServer
from .sftp_local import LOCAL_BYTES, LOCAL_FILES, LOCAL_IDLE, LocalFiles
from .shell import DEFAULT_OUTPUT_CAP, Shell
from .verbs import CallerVerbs

__all__ = ["KeyVerifier", "SshLimits", "agents_snippet", "load_host_key", "start_ssh_server"]

KeyVerifier = Callable[[bytes], Caller | None]
Keyless = bool | Callable[[], bool]
log = logging.getLogger(__name__)
_SESSION_IDS = itertools.count(1)


@dataclass(frozen=True)
class SshLimits:
    """What one address and one session may do; 0 turns a rate limit off."""

    connections_per_minute: int = 10  # failed logins (connections that never log in) per address
    commands_per_minute: int = 100
    output_cap: int = DEFAULT_OUTPUT_CAP
    max_upload: int = DEFAULT_MAX_UPLOAD
    local_files: int = LOCAL_FILES  # an SFTP session's memory-only files (names the provider refuses)
    local_bytes: int = LOCAL_BYTES
    local_idle: float = LOCAL_IDLE


def load_host_key(path: Path) -> asyncssh.SSHKey:
    """Given a host-key file, load it; when absent, generate an Ed25519 key there once (mode 0600)."""
    path = path.expanduser()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        key = asyncssh.generate_private_key("ssh-ed25519", comment="afi-memory host key")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(key.export_private_key())
        return key
    return asyncssh.read_private_key(str(path))


def agents_snippet(host: str, port: int) -> str:
    """Given where the server listens, return the AGENTS.md snippet the ``agents`` command prints."""
    ssh = f"ssh -p {port} {host}"
    return f"""## Memory over SSH (afi-memory)

Your memory is a filesystem served over SSH. Run one command per call: `{ssh} '<command>'`.

- Look around: `ls -la /facts`, `cat /facts/<name>.md`, `tree -L 2 /`, `stat /files/<path>`.
- Find text: `grep -rn 'words' /` (GNU grep's `path:line:text`), `grep -rl -i 'x' /facts`, `find / -name '*.md'`.
- Ask by meaning: `search "what does Alice drink"` prints `score<TAB>path<TAB>first line`, best first.
- Remember: `echo 'Alice drinks espresso' > /facts/alice-coffee.md` (YAML front matter allowed; `cat > FILE` reads
  stdin); `rm /facts/<name>.md` forgets; work files live under /files; /history keeps every version (read-only).
- Pipes work: `grep -rn x / | head -n 5`. Nothing reaches a real shell.
- Structured answers: `ssh -s -p {port} {host} afi` speaks JSON-RPC 2.0, one request per line, e.g.
  `{{"jsonrpc": "2.0", "id": 1, "method": "search", "params": {{"query": {{"semantic": "coffee"}}}}}}`.
- Errors go to stderr as `afi: <path>: <code>: <message>` with exit status 2; grep exits 1 when nothing matched.
"""


class _Door(asyncssh.SSHServer):
    """One connection: the failed-login limit at the door, then public-key authentication to a caller."""

    def __init__(self, server: _SshServer) -> None:
        self.server = server
        self.caller: Caller | None = None
        self.refusal: AfiError | None = None
        self.session = next(_SESSION_IDS)
        self.conn: asyncssh.SSHServerConnection | None = None
        self.address = "unknown"
        self.authenticated = False

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        peer = conn.get_extra_info("peername") or ("unknown",)
        self.address = str(peer[0])
        failures = self.server.failures
        wait = failures.wait(f"addr:{self.address}") if failures is not None else 0.0
        if wait > 0:
            self.refusal = RateLimited(
                f"too many failed logins from {self.address} (at most {self.server.limits.connections_per_minute} "
                f"per minute); retry in {math.ceil(wait)} s",
                retry_after=round(wait, 3),
            )

    def auth_completed(self) -> None:
        self.authenticated = True

    def connection_lost(self, exc: Exception | None) -> None:
        # Only a connection that never logged in counts against its address: working ones are free.
        if not self.authenticated and self.refusal is None and self.server.failures is not None:
            with contextlib.suppress(RateLimited):
                self.server.failures.check(f"addr:{self.address}")

    async def begin_auth(self, username: str) -> bool:
        if self.refusal is not None:
            assert self.conn is not None
            message = error_line(self.refusal)
            self.conn.send_auth_banner(message)  # shown by clients at their default log level
            self.conn.disconnect(asyncssh.DISC_TOO_MANY_CONNECTIONS, message.strip())  # shown even when quiet
            return True
        if await asyncio.to_thread(self.server.is_keyless, self.address):
            try:
                self.caller = await asyncio.to_thread(self.server.provider.authenticate, None)
            except AfiError:  # a key was created since the check: ask for one
                return True
            return False
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    async def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        if self.refusal is not None or self.server.verify_key is None:
            return False
        caller = await asyncio.to_thread(self.server.verify_key, key.public_data)
        if caller is None:
            return False
        self.caller = caller
        return True


class _SshServer:
    """What every connection shares: the provider, the key verifier and the limits."""

    def __init__(
        self, provider: Provider, verify_key: KeyVerifier | None, keyless: Keyless, limits: SshLimits, agents: str
    ) -> None:
        self.provider = provider
        self.verify_key = verify_key
        self.keyless = keyless
        self.limits = limits
        self.agents = agents
        per_min = limits.connections_per_minute
        self.failures = RateLimiter(per_min / 60, per_min) if per_min > 0 else None
        per_cmd = limits.commands_per_minute
        self.commands = RateLimiter(per_cmd / 60, per_cmd) if per_cmd > 0 else None

    def door(self) -> _Door:
        return _Door(self)

    def is_keyless(self, address: str) -> bool:
        """True when a caller from ``address`` comes in without a key: only from this machine."""
        if not is_loopback_host(address):
            return False
        return self.keyless() if callable(self.keyless) else self.keyless

    def check_command(self, door: _Door) -> None:
        if self.commands is not None:
            try:
                self.commands.check(f"session:{door.session}")
            except RateLimited as err:
                raise RateLimited(
                    f"too many commands in this session (at most {self.limits.commands_per_minute} per minute); "
                    f"retry in {err.retry_after:.1f} s",
                    retry_after=err.retry_after or 1.0,
                ) from None

    def rpc_limits(self) -> dict[str, Any]:
        extra: dict[str, Any] = {"ssh_output_cap": self.limits.output_cap}
        if self.commands is not None:
            extra["rate"] = {
                "per_second": self.commands.rate,
                "burst": self.commands.burst,
                "keyed_by": "ssh session",
            }
        return extra

    def shell(self, caller: Caller) -> Shell:
        return Shell(
            CallerVerbs(self.provider, caller),
            user=caller.principal,
            group=caller.space,
            output_cap=self.limits.output_cap,
            write_cap=self.limits.max_upload,
            agents_text=self.agents,
        )

    async def session(self, process: asyncssh.SSHServerProcess[str]) -> None:
        door = _door_of(process.channel)
        try:
            if door.caller is None:
                raise Internal("the session has no authenticated caller")
            if process.subsystem == "afi":
                await self._rpc(process, door, door.caller)
            elif process.subsystem:
                raise Unsupported(f"no subsystem {process.subsystem!r} here; the subsystems are afi and sftp")
            elif process.command is not None:
                await self._exec(process, door, door.caller, process.command)
            else:
                await self._interactive(process, door, door.caller)
        except AfiError as err:
            process.stderr.write(error_line(err))
            process.exit(2)
        except (asyncssh.BreakReceived, asyncssh.SignalReceived, asyncssh.DisconnectError, BrokenPipeError):
            process.exit(130)
        except Exception as err:  # a bug ends this channel with an error; left to asyncssh it drops the connection
            log.exception("an ssh session failed")
            with contextlib.suppress(OSError):  # the channel may be closed already
                process.stderr.write(error_line(Internal(f"the session failed ({type(err).__name__})")))
                process.exit(2)

    async def _exec(self, process: asyncssh.SSHServerProcess[str], door: _Door, caller: Caller, line: str) -> None:
        self.check_command(door)
        loop = asyncio.get_running_loop()

        cap = self.limits.max_upload

        def stdin() -> Iterator[bytes]:
            # Read at most one byte past the cap: a client cannot stream gigabytes into the server.
            data = asyncio.run_coroutine_threadsafe(_read_at_most(process.stdin, cap + 1), loop).result()
            if len(data) > cap:
                raise TooLarge(f"standard input is over the {cap}-byte upload cap")
            if data:
                yield data.encode("utf-8", "surrogateescape")

        result = await asyncio.to_thread(self.shell(caller).run_line, line, stdin())
        await _write(process, result.stdout, result.stderr)
        process.exit(result.status)

    async def _interactive(self, process: asyncssh.SSHServerProcess[str], door: _Door, caller: Caller) -> None:
        shell = self.shell(caller)
        process.stdout.write(
            f"afi-memory shell as {caller.principal} (space {caller.space}). Type 'help' for the commands, "
            "'exit' to leave.\n"
        )
        status = 0
        while True:
            process.stdout.write(f"afi:{shell.cwd}$ ")
            try:
                line = await process.stdin.readline()
            except (asyncssh.TerminalSizeChanged, asyncssh.BreakReceived, asyncssh.SignalReceived):
                process.stdout.write("\n")
                continue
            if line == "":
                break
            line = heal(line).strip()
            if line in ("exit", "logout", "quit"):
                break
            if not line:
                continue
            try:
                self.check_command(door)
            except RateLimited as err:
                process.stderr.write(error_line(err))
                continue
            result = await asyncio.to_thread(shell.run_line, line, no_input())
            status = result.status
            await _write(process, result.stdout, result.stderr)
        process.exit(status)

    async def _rpc(self, process: asyncssh.SSHServerProcess[str], door: _Door, caller: Caller) -> None:
        endpoint = RpcEndpoint(
            self.provider, caller, manifest_extra=self.rpc_limits(), before_call=lambda: self.check_command(door)
        )
        while True:
            line = await process.stdin.readline()
            if line == "":
                break
            if not line.strip():
                continue
            response = await asyncio.to_thread(endpoint.handle_line, heal(line))
            if response is not None:
                process.stdout.write(response + "\n")
                await process.stdout.drain()
        process.exit(0)

    def sftp(self, chan: asyncssh.SSHServerChannel[bytes]) -> AfiSFTPServer:
        door = _door_of(chan)
        if door.caller is None:  # pragma: no cover - asyncssh opens sessions only after authentication
            raise asyncssh.SFTPPermissionDenied("not authenticated")
        limits = self.limits
        memory = LocalFiles(max_bytes=limits.local_bytes, max_files=limits.local_files, idle=limits.local_idle)
        return AfiSFTPServer(chan, self.provider, door.caller, limits.max_upload, memory)


def _door_of(chan: Any) -> _Door:
    owner = chan.get_connection().get_owner()
    assert isinstance(owner, _Door)
    return owner


async def _write(process: asyncssh.SSHServerProcess[str], out: bytes, err: str) -> None:
    if out:
        process.stdout.write(out.decode("utf-8", "surrogateescape"))
    if err:
        process.stderr.write(err)
    await process.stdout.drain()


async def start_ssh_server(
    provider: Provider,
    *,
    host: str = "127.0.0.1",
    port: int = 2222,
    host_key: Path,
    verify_key: KeyVerifier | None,
    keyless: Keyless = False,
    limits: SshLimits | None = None,
    shown_host: str | None = None,
) -> asyncssh.SSHAcceptor:
    """Start serving ``provider`` over SSH; return the acceptor (``close()`` it to stop).

    Args:
        host_key: the server's key file, generated on first use and kept.
        verify_key: given a presented public key's wire blob, return its caller or ``None``.
        keyless: accept loopback connections without authentication as the provider's keyless caller
            (while a store has no active key); a function is asked at each new connection.
        shown_host: the host name the ``agents`` snippet tells agents to use.
    """
    limits = limits or SshLimits()
    key = load_host_key(host_key)
    holder: dict[str, _SshServer] = {}

    acceptor = await asyncssh.create_server(
        lambda: holder["server"].door(),
        host,
        port,
        server_host_keys=[key],
        process_factory=lambda process: holder["server"].session(process),
        sftp_factory=lambda chan: holder["server"].sftp(chan),
        allow_scp=True,
        encoding=ENCODING,  # UTF-8 that holds no byte back (.codec)
        errors="surrogateescape",
        line_editor=True,
        keepalive_interval=60,
    )
    bound = acceptor.get_port() or port
    holder["server"] = _SshServer(provider, verify_key, keyless, limits, agents_snippet(shown_host or host, bound))
    return acceptor


async def _read_at_most(stream: asyncssh.SSHReader[str], size: int) -> str:
    """Read ``stream`` to its end or to ``size`` characters, whichever comes first (one ``read(n)``
    returns only what has arrived: a 200,000-byte upload was cut at 65,536, exit 0)."""
    parts: list[str] = []
    left = size
    while left > 0:
        chunk = await stream.read(left)
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return "".join(parts)
