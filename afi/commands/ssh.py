"""``afi ssh``: the SSH binding (shell, SFTP, the ``afi`` JSON-RPC subsystem) over the embedded store.

``afi serve --ssh`` runs the same server beside the HTTP one, in one event loop (:func:`run_beside`).
"""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ..config import default_data_dir
from ..provider import Caller
from .errors import afi_errors, stderr
from .options import DbOption, RootOption, resolve_db, resolve_root

__all__ = ["SshOptions", "register", "run_beside", "start"]

stdout = Console(highlight=False)

AuthorizedKeysOption = Annotated[
    Path | None,
    typer.Option(
        "--authorized-keys", help="OpenSSH authorized-keys file (options afi-space, afi-scopes, afi-principal)"
    ),
]
HostKeyOption = Annotated[
    Path | None,
    typer.Option(
        "--host-key", help="Host key file, generated once if absent [default: <data dir>/ssh_host_ed25519_key]"
    ),
]


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


def _verifier(db: Path, authorized: Path | None) -> tuple[Any, bool, int]:
    """Return (verify_key, keyless, how many keys can log in)."""
    from afi.providers.memory.keys import KeyStore
    from afi.providers.memory.ssh_keys import SshKeyStore
    from afi.sshkeys import AuthorizedKeys

    store = SshKeyStore(db)
    listed = AuthorizedKeys(authorized) if authorized is not None else None

    def verify(blob: bytes) -> Caller | None:
        caller = listed.lookup(blob) if listed is not None else None
        return caller if caller is not None else store.verify(blob)

    known = (len(listed) if listed is not None else 0) + store.count()
    keyless = listed is None and store.count() == 0 and KeyStore(db).count() == 0
    return verify, keyless, known


async def start(provider: Any, db: Path, options: SshOptions) -> Any:
    """Given a provider and its store, start the SSH server; return its acceptor (announced on stdout)."""
    from afi.bindings.ssh import SshLimits, start_ssh_server

    from .serve import is_loopback

    verify, keyless, known = _verifier(db, options.authorized_keys)
    if keyless and not is_loopback(options.host):
        raise typer.BadParameter(
            f"refusing SSH on {options.host} without keys: add one (afi token ssh add KEY.pub) or pass "
            "--authorized-keys, or bind 127.0.0.1"
        )
    acceptor = await start_ssh_server(
        provider,
        host=options.host,
        port=options.port,
        host_key=options.host_key or default_data_dir() / "ssh_host_ed25519_key",
        verify_key=None if keyless else verify,
        keyless=keyless,
        limits=SshLimits(
            connections_per_minute=options.connections_per_minute,
            commands_per_minute=options.commands_per_minute,
            output_cap=options.output_cap,
        ),
    )
    port = acceptor.get_port()
    how = "no keys: every loopback caller is the local owner" if keyless else f"{known} key(s) may log in"
    stdout.print(f"afi: listening on ssh://{options.host}:{port} ({how})", markup=False, soft_wrap=True)
    stdout.file.flush()
    if not keyless and known == 0:
        stderr.print(
            "afi: no SSH key can log in yet: add one with 'afi token ssh add ~/.ssh/id_ed25519.pub'", markup=False
        )
    return acceptor


async def _serve_forever(provider: Any, db: Path, options: SshOptions) -> None:
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


def run_beside(http_server: Any, provider: Any, db: Path, options: SshOptions) -> None:
    """Run a uvicorn server and the SSH server in one event loop until the HTTP server stops."""

    async def both() -> None:
        acceptor = await start(provider, db, options)
        try:
            await http_server.serve()
        finally:
            acceptor.close()
            await acceptor.wait_closed()

    asyncio.run(both())


def ssh(
    db: DbOption = None,
    root: RootOption = None,
    host: Annotated[str, typer.Option(help="Address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one)")] = 2222,
    authorized_keys: AuthorizedKeysOption = None,
    host_key: HostKeyOption = None,
    conn_rate: Annotated[int, typer.Option(help="New connections per minute per address (0: no limit)")] = 10,
    cmd_rate: Annotated[int, typer.Option(help="Commands per minute per session (0: no limit)")] = 100,
    output_cap: Annotated[int, typer.Option(help="Most bytes one command may print")] = 4 * 1024 * 1024,
) -> None:
    """Serve the memory over SSH: 'ssh -p 2222 localhost grep -r canary /', sftp, and 'ssh -s … afi'."""
    from afi.providers.memory.keys import KeyStore
    from afi.providers.memory.provider import MemoryProvider

    db_path = resolve_db(db)
    options = SshOptions(host, port, authorized_keys, host_key, conn_rate, cmd_rate, output_cap)
    with afi_errors():
        provider = MemoryProvider(db_path, resolve_root(root), keys=KeyStore(db_path))
        try:
            asyncio.run(_serve_forever(provider, db_path, options))
        except OSError as err:
            stderr.print(f"afi: cannot listen on {host}:{port}: {err.strerror or err}", markup=False)
            raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    """Add ``afi ssh`` to ``app``."""
    app.command("ssh")(ssh)
