"""``afi doctor [--json]``: check this install and the store, part by part (nothing is changed).

It says which embedder recall uses (and has it embed a sentence), whether the store's schema is up to
date, and whether the mount's and SSH's system parts are here. Exit 1 when a part has a problem.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from .console import stdout
from .errors import afi_errors
from .options import DbOption, RootOption, resolve_db, resolve_root

__all__ = ["register"]

_MARK = {"ok": "ok", "warning": "warning", "problem": "PROBLEM"}


def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON")] = False,
    embedder: Annotated[
        str | None, typer.Option("--embedder", help="Check this embedder (minilm or hash) instead of the store's")
    ] = None,
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Check the install and the store: schema, workspace root, the embedder recall uses, mount, ssh."""
    from rich.table import Table

    from afi.app.doctor import run_checks
    from afi.app.local import embedder_choice

    path = resolve_db(db, create=False)
    with afi_errors():
        checks = run_checks(path, resolve_root(root, path, create=False), embedder_choice(embedder))
    if as_json:
        typer.echo(json.dumps([check.as_json() for check in checks], indent=2))
    else:
        table = Table("part", "", "found")
        for check in checks:
            table.add_row(check.name, _MARK[check.status], check.detail)
        stdout(wide=True).print(table)
    if any(check.status == "problem" for check in checks):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``afi doctor`` to ``app``."""
    app.command("doctor")(doctor)
