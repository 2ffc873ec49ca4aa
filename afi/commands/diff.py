"""``afi diff A B``: what changed in a space's notes and workspace files between two instants or snapshots.

``A`` and ``B`` are ISO 8601 times, snapshot names (``afi snapshot create``) or ``now``. Text output
is one line per note (``+`` added, ``~`` changed, ``-`` retired), then per file (``+`` added, ``~``
changed, ``-`` deleted), then, when ``B`` is now, one line per open conflict (``!``: a name a sync
settled that no write has answered yet); ``--json`` prints the whole diff, the files under ``files``,
the open conflicts under ``conflicts``. The exit status says whether the two instants differ: open
conflicts are not a difference between them and leave it as it is.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated, Any

import typer

from .errors import afi_errors
from .options import DbOption, RootOption, SpaceOption, resolve_store

__all__ = ["register"]

Side = Annotated[str, typer.Argument(help="An instant (ISO 8601), a snapshot's name, or now")]


def diff(
    since: Side,
    until: Side = "now",
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the diff as JSON")] = False,
) -> None:
    """Show the notes added, changed and retired, and the workspace files added, changed and deleted,
    between two instants (or snapshots); then, up to now, the open conflicts (! lines: names a sync
    settled that no write has answered yet). Exit status as diff(1): 0 when nothing changed, 1 when
    something did (open conflicts alone leave it 0), 2 on an error."""
    from afi.app.local import local_owner, open_provider

    with afi_errors():
        provider = open_provider(*resolve_store(db, root))
        found = provider.diff(local_owner(space), since, until)
        conflicts = provider.open_conflicts(local_owner(space)) if until == "now" else []
    if as_json:
        typer.echo(json.dumps({**asdict(found), "conflicts": conflicts}, indent=2))
    else:
        typer.echo(f"notes from {found.since} to {found.until}")
        for mark, changes in (("+", found.added), ("~", found.changed), ("-", found.retired)):
            for change in changes:
                ids = {"+": change.after, "~": f"{change.before} -> {change.after}", "-": change.before}[mark]
                typer.echo(f"{mark} {change.path}  ({ids})")
        for mark, moved in (("+", found.files.added), ("~", found.files.changed), ("-", found.files.deleted)):
            for file in moved:
                typer.echo(f"{mark} {file.path}  ({_sizes(file.size_before, file.size_after)})")
        for conflict in conflicts:
            typer.echo(f"! {conflict['path']}  ({_settled(conflict)})")
    files = found.files.added or found.files.changed or found.files.deleted
    if found.added or found.changed or found.retired or files:
        raise typer.Exit(1)


def _settled(conflict: dict[str, Any]) -> str:
    losers = conflict["losers"]
    ids = ", ".join(loser["id"] for loser in losers)
    kept = " ".join(loser["path"] for loser in losers)
    return f"{conflict['id']} won over {ids} in a sync; kept in {kept}"


def _sizes(before: int | None, after: int | None) -> str:
    return " -> ".join(f"{n} bytes" for n in (before, after) if n is not None)


def register(app: typer.Typer) -> None:
    """Add ``afi diff`` to ``app``."""
    app.command("diff")(diff)
