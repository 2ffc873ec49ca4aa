"""``afi conformance URL``: run the conformance kit against an AFI server over HTTP."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from .console import stdout
from .options import DbOption, resolve_db

__all__ = ["register"]


def conformance(
    url: Annotated[str, typer.Argument(help="The server's base URL, e.g. http://127.0.0.1:8765")],
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="AFI_TOKEN",
            help="A key that may write [default, for a server on this machine: the --db store's owner token]",
        ),
    ] = None,
    other_token: Annotated[
        str | None, typer.Option("--other-token", help="A key of another space, to check cloaking")
    ] = None,
    profile: Annotated[int, typer.Option("--profile", min=0, max=3, help="Highest profile level to check")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Run only scenarios whose id starts with this (repeatable)")
    ] = None,
    db: DbOption = None,
) -> None:
    """Run the AFI conformance kit against URL; exit 1 when any scenario fails."""
    import secrets

    from ..clients import HttpClient
    from ..conformance import run_kit

    if token is None:
        from ..app.auth_status import owner_token_for

        token = owner_token_for(url, resolve_db(db, create=False))
    client = HttpClient(url, token)
    other = HttpClient(url, other_token) if other_token else None
    anonymous = HttpClient(url)
    forged = HttpClient(url, "afi_" + secrets.token_urlsafe(32))
    try:
        report = run_kit(client, other=other, anonymous=anonymous, forged=forged, profile=profile, only=only)
    finally:
        for each in (client, other, anonymous, forged):
            if each is not None:
                each.close()
    if as_json:
        stdout().print_json(json.dumps(report.to_dict()))
    else:
        report.render(stdout())
    if not report.ok:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``afi conformance`` to ``app``."""
    app.command("conformance")(conformance)
