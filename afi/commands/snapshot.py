"""``afi snapshot create|list|delete``: named instants of a space, shown at ``/.afi/at/<name>/``.

Each command opens the store as its local owner; a create or delete is locked and audited like any
write. An AfiError becomes ``afi: <path>: <code>: <message>`` and exit 2.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from .errors import afi_errors
from .options import DbOption, RootOption, SpaceOption, resolve_store

__all__ = ["register"]

snapshot_app = typer.Typer(
    name="snapshot", help="Named instants of a space: /.afi/at/<name>/ shows its notes as they stood then.",
    no_args_is_help=True,
)  # fmt: skip

NameArg = Annotated[str, typer.Argument(help="Snapshot name: a letter, then [a-z0-9._-]")]


def _provider(db: Any, root: Any) -> Any:
    from afi.app.local import open_provider

    return open_provider(*resolve_store(db, root))


@snapshot_app.command("create")
def create(
    name: NameArg,
    at: Annotated[str | None, typer.Option("--at", help="The instant to name, ISO 8601 (default: now)")] = None,
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Name an instant of the space (now, or --at); prints the snapshot and where to look."""
    from afi.app.local import local_owner

    with afi_errors():
        made = _provider(db, root).snapshot_create(local_owner(space), name, at)
        typer.echo(json.dumps({"name": made.name, "at": made.at, "path": f"/.afi/at/{made.name}/"}, indent=2))


@snapshot_app.command("list")
def list_snapshots(space: SpaceOption = "default", db: DbOption = None, root: RootOption = None,
                   as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False) -> None:  # fmt: skip
    """List the space's snapshots: name and the instant each names (tab-separated rows)."""
    from afi.app.local import local_owner

    with afi_errors():
        found = _provider(db, root).snapshot_list(local_owner(space))
        if as_json:
            typer.echo(json.dumps([{"name": s.name, "at": s.at, "created_at": s.created_at} for s in found], indent=2))
            return
        for snapshot in found:
            sys.stdout.write(f"{snapshot.name}\t{snapshot.at}\n")


@snapshot_app.command("delete")
def delete(name: NameArg, space: SpaceOption = "default", db: DbOption = None, root: RootOption = None) -> None:
    """Delete a snapshot (the notes it showed stay as they are)."""
    from afi.app.local import local_owner

    with afi_errors():
        _provider(db, root).snapshot_delete(local_owner(space), name)
        typer.echo(f"deleted {name}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``afi snapshot …`` to ``app``."""
    app.add_typer(snapshot_app)
