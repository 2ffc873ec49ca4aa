"""The SSH binding over the memory provider: ``afi ssh``, and ``afi serve --ssh`` beside the HTTP server."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from afi.auth.authorized_keys import AuthorizedKeys
from afi.auth.door import is_loopback_host
from afi.auth.keys import KeyStore
from afi.auth.ssh_keys import SshKeyStore
from afi.bindings.ssh import SshLimits, start_ssh_server
from afi.config import default_data_dir
from afi.provider import Caller
from afi.storage.database import is_postgres_url

__all__ = ["HOST_KEY_NAME", "Refused", "SshOptions", "default_host_key", "run_beside", "run_ssh", "start"]

HOST_KEY_NAME = "ssh_host_ed25519_key"

stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False)


class Refused(ValueError):
    """The options ask for something unsafe (e.g. SSH off loopback with no key); the message says what."""


@dataclass(frozen=True)
class SshOptions:
    """How to run the SSH binding: where, which keys let callers in, and its limits."""

    host: str = "127.0.0.1"
    port: int = 2222
    authorized_keys: Path | None = None
    host_key: Path | None = None
    connections_per_minute: int = 10
    commands_per_minute: int = 100
    output_cap: int = 4 * 1024 * 1024


def default_host_key(db: Path | str) -> Path:
    """Given the store, return where its SSH host key lives by default: beside a SQLite file (so two
    stores do not share a host key by accident), or in the per-user data folder for PostgreSQL."""
    if is_postgres_url(db):
        return default_data_dir() / HOST_KEY_NAME
    return Path(db).expanduser().parent / HOST_KEY_NAME


def _verifier(db: Path | str, authorized: Path | None) -> tuple[Any, Callable[[], bool], int]:
    """Return (verify_key, whether no key was ever added or issued, how many keys can log in now)."""
    store = SshKeyStore(db)
    api = KeyStore(db)
    listed = AuthorizedKeys(authorized) if authorized is not None else None

    def verify(blob: bytes) -> Caller | None:
        caller = listed.lookup(blob) if listed is not None else None
        return caller if caller is not None else store.verify(blob)

    def keyless() -> bool:
        return listed is None and store.count(revoked=True) == 0 and api.keyless()

    known = (len(listed) if listed is not None else 0) + store.count()
    return verify, keyless, known


async def start(provider: Any, db: Path | str, options: SshOptions) -> Any:
    """Given a provider and its store, start the SSH server; return its acceptor (announced on stdout).

    Until the first SSH or API key exists, and when no authorized-keys file is given, a loopback
    caller is the local owner without a key; that is checked at each new connection. Revoking keys
    never reopens it.
    """
    verify, keyless, known = _verifier(db, options.authorized_keys)
    open_now = keyless()
    loopback = is_loopback_host(options.host)
    if open_now and not loopback:
        raise Refused(
            f"refusing SSH on {options.host} without keys: add one (afi token ssh add KEY.pub) or pass "
            "--authorized-keys, or bind 127.0.0.1"
        )
    acceptor = await start_ssh_server(
        provider,
        host=options.host,
        port=options.port,
        host_key=options.host_key or default_host_key(db),
        verify_key=verify,
        keyless=keyless,
        limits=SshLimits(
            connections_per_minute=options.connections_per_minute,
            commands_per_minute=options.commands_per_minute,
            output_cap=options.output_cap,
        ),
    )
    port = acceptor.get_port()
    how = "no keys: every loopback caller is the local owner" if open_now else f"{known} key(s) may log in"
    stdout.print(f"afi: listening on ssh://{options.host}:{port} ({how})", markup=False, soft_wrap=True)
    stdout.file.flush()
    if not open_now and known == 0:
        stderr.print(
            "afi: no SSH key can log in yet: add one with 'afi token ssh add ~/.ssh/id_ed25519.pub'", markup=False
        )
    return acceptor


async def _serve_forever(provider: Any, db: Path | str, options: SshOptions) -> None:
    acceptor = await start(provider, db, options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        acceptor.close()
        await acceptor.wait_closed()


def run_ssh(provider: Any, db: Path | str, options: SshOptions) -> None:
    """Serve the provider (see :func:`~afi.app.local.open_provider`) over SSH until SIGINT or SIGTERM."""
    asyncio.run(_serve_forever(provider, db, options))


def run_beside(http_server: Any, provider: Any, db: Path | str, options: SshOptions) -> None:
    """Run a uvicorn server and the SSH server in one event loop until the HTTP server stops."""

    async def both() -> None:
        acceptor = await start(provider, db, options)
        try:
            await http_server.serve()
        finally:
            acceptor.close()
            await acceptor.wait_closed()

    asyncio.run(both())
