"""``afi space fork|restore|list``: branch a space as it stood at an instant, roll one back, see them all.

``fork SRC[@WHEN] DST`` starts the empty space DST as SRC stood at WHEN (an ISO 8601 instant or a
snapshot of SRC; default now), its notes' history whole. ``restore SPACE@WHEN`` writes SPACE as it
stood at WHEN as new versions, losing nothing of today (``--dry-run`` only says what would change).
Each opens the store as its local owner, locked and audited like any write; progress goes to stderr,
the result to stdout. An AfiError becomes ``afi: <path>: <code>: <message>`` and exit 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict
from typing import Annotated, Any

import typer

from .errors import afi_errors
from .options import DbOption, RootOption, resolve_store

__all__ = ["register"]

space_app = typer.Typer(
    name="space", help="Spaces: fork one as it stood at an instant, restore one to an instant, list them.",
    no_args_is_help=True,
)  # fmt: skip

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]


def _provider(db: Any, root: Any) -> Any:
    from afi.app.local import open_provider

    return open_provider(*resolve_store(db, root))


@contextmanager
def _progress(label: str) -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress bar on stderr, one task per stage (notes, files), fed ``(stage, done, total)``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    columns = (TextColumn(f"{label} {{task.description}}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        tasks: dict[str, TaskID] = {}

        def tell(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        yield tell


@space_app.command("fork")
def fork(
    source: Annotated[str, typer.Argument(help="SRC or SRC@WHEN: WHEN an ISO 8601 instant or a snapshot of SRC")],
    dest: Annotated[str, typer.Argument(help="The new space; it must hold nothing yet")],
    db: DbOption = None,
    root: RootOption = None,
    as_json: JsonOption = False,
) -> None:
    """Start the empty space DST as SRC stood at WHEN (default now), with its history up to then."""
    from afi.app.local import local_owner

    with afi_errors(), _progress("fork") as tell:
        made = _provider(db, root).space_fork(local_owner(dest), source, tell)
    if as_json:
        typer.echo(json.dumps(asdict(made), indent=2))
        return
    typer.echo(f"forked {made.source}@{made.at} into {made.dest}: {made.versions} note versions, "
               f"{made.blocks} working blocks, {made.snapshots} snapshots, {made.files} files")  # fmt: skip


@space_app.command("restore")
def restore(
    target: Annotated[str, typer.Argument(help="SPACE@WHEN: WHEN an ISO 8601 instant or a snapshot of SPACE")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print what would change")] = False,
    db: DbOption = None,
    root: RootOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write SPACE as it stood at WHEN as new versions; nothing of today is lost (it stays in /history)."""
    from afi.app.local import local_owner, restore_target

    with afi_errors():
        space, when = restore_target(target)
        with nullcontext(None) if dry_run else _progress("restore") as tell:
            plan = _provider(db, root).space_restore(local_owner(space), when, dry_run=dry_run, progress=tell)
    if as_json:
        typer.echo(json.dumps(asdict(plan) | {"dry_run": dry_run}, indent=2))
        return
    verb = "would change" if dry_run else "changed"
    typer.echo(f"{plan.space} back to {plan.at}: {verb}" + ("" if not plan.empty else " nothing"))
    for mark, paths in (("+", plan.brought_back), ("~", plan.changed), ("-", plan.retired)):
        for path in paths:
            typer.echo(f"{mark} {path}")
    for mark, paths in (("~", plan.files_written), ("-", plan.files_deleted)):
        for path in paths:
            typer.echo(f"{mark} /files/{path}")


@space_app.command("list")
def list_spaces(db: DbOption = None, root: RootOption = None, as_json: JsonOption = False) -> None:
    """List the spaces that hold notes or files: current notes, note versions, files, ledger sessions, and
    the stores each has synced with (the latest: where it was reached and when)."""
    from afi.app.local import local_owner

    with afi_errors():
        provider = _provider(db, root)
        found = provider.space_list(local_owner("default"))
        peers = provider.sync_peers()
    for row in found:
        row["peers"] = [{"store": p.peer, "label": p.label, "synced_at": p.synced_at, "received": p.received}
                        for p in peers if p.space == row["space"]]  # fmt: skip
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    sys.stdout.write("space\tnotes\tversions\tfiles\tsessions\tlast synced\n")
    for row in found:
        last = row["peers"][0] if row["peers"] else None
        synced = f"{last['label']} at {last['synced_at']}" if last else "-"
        if len(row["peers"]) > 1:
            synced += f" (+{len(row['peers']) - 1} more)"
        sys.stdout.write(
            f"{row['space']}\t{row['notes']}\t{row['versions']}\t{row['files']}\t{row['sessions']}\t{synced}\n"
        )


def register(app: typer.Typer) -> None:
    """Add ``afi space …`` to ``app``."""
    app.add_typer(space_app)
