"""``afi ssh``: the SSH binding (shell, SFTP, the ``afi`` JSON-RPC subsystem) over the embedded store.

``afi serve --ssh`` runs the same server beside the HTTP one, in one event loop
(:func:`afi.app.ssh.run_beside`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from .errors import afi_errors, stderr
from .options import DbOption, RootOption, resolve_db, resolve_root

__all__ = ["refusals", "register"]

AuthorizedKeysOption = Annotated[
    Path | None,
    typer.Option(
        "--authorized-keys", help="OpenSSH authorized-keys file (options afi-space, afi-scopes, afi-principal)"
    ),
]
HostKeyOption = Annotated[
    Path | None,
    typer.Option(
        "--host-key",
        help="Host key file, generated once if absent [default: ssh_host_ed25519_key beside the --db file; "
        "<data dir>/ssh_host_ed25519_key for PostgreSQL]",
    ),
]


@contextmanager
def refusals() -> Iterator[None]:
    """Run an SSH server; options it refuses (no key off loopback) become a usage error."""
    from afi.app.ssh import Refused

    try:
        yield
    except Refused as err:
        raise typer.BadParameter(str(err)) from None


def ssh(
    db: DbOption = None,
    root: RootOption = None,
    host: Annotated[str, typer.Option(help="Address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one)")] = 2222,
    authorized_keys: AuthorizedKeysOption = None,
    host_key: HostKeyOption = None,
    conn_rate: Annotated[
        int,
        typer.Option(
            help="Failed logins per minute per address; past it new connections are refused, saying why "
            "(connections that log in are not counted; 0: no limit)"
        ),
    ] = 10,
    cmd_rate: Annotated[int, typer.Option(help="Commands per minute per session (0: no limit)")] = 100,
    output_cap: Annotated[int, typer.Option(help="Most bytes one command may print")] = 4 * 1024 * 1024,
) -> None:
    """Serve the memory over SSH: 'ssh -p 2222 localhost grep -r canary /', sftp, and 'ssh -s … afi'."""
    from afi.app.local import open_provider
    from afi.app.ssh import SshOptions, run_ssh

    db_path = resolve_db(db)
    options = SshOptions(host, port, authorized_keys, host_key, conn_rate, cmd_rate, output_cap)
    with afi_errors(), refusals():
        provider = open_provider(db_path, resolve_root(root, db_path), keys=True)
        try:
            run_ssh(provider, db_path, options)
        except OSError as err:
            stderr().print(f"afi: cannot listen on {host}:{port}: {err.strerror or err}", markup=False)
            raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    """Add ``afi ssh`` to ``app``."""
    app.command("ssh")(ssh)
