"""``afi auth token|status``: the owner's credential, and which mode a store and a server are in."""

from __future__ import annotations

from typing import Annotated

import typer

from .console import stdout
from .errors import afi_errors
from .options import DbOption, resolve_db

__all__ = ["register"]

auth_app = typer.Typer(help="The owner's token, and who may come in (keyless or keys required).", no_args_is_help=True)


@auth_app.command("token")
def token(db: DbOption = None) -> None:
    """Print the store owner's token (created, mode 0600, beside the store the first time).

    A server over this store takes it as the owner even when API keys are required, e.g.
    curl -H "Authorization: Bearer $(afi auth token)" http://127.0.0.1:8765/afi/list?path=/
    """
    from ..auth.owner import ensure_owner_token

    with afi_errors():
        secret = ensure_owner_token(resolve_db(db))
    stdout().print(secret, markup=False, soft_wrap=True)


@auth_app.command("status")
def status(
    db: DbOption = None,
    url: Annotated[str | None, typer.Option("--url", help="Also ask this server, e.g. http://127.0.0.1:8765")] = None,
) -> None:
    """Say which mode the store is in (keyless loopback or keys required), how many keys are active,
    where the owner's token is, and (with --url) what a server answers."""
    from afi.app.auth_status import auth_status, owner_token_for, probe_server

    store = resolve_db(db, create=False)
    with afi_errors():
        found = auth_status(store)
    for line in found.lines():
        stdout().print(line, markup=False, soft_wrap=True)
    if url is not None:
        for line in probe_server(url, owner_token_for(url, store)):
            stdout().print(line, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``afi auth …`` to ``app``."""
    app.add_typer(auth_app, name="auth")
