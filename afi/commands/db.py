"""``afi db status|migrate|copy|reembed``: the store's schema version, its pending steps and its tables; a
copy to the other engine; its vectors moved over to another embedder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .console import stdout
from .errors import afi_errors
from .options import DbOption, RootOption, resolve_db, resolve_root

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import TaskID

    from afi.app.db import SchemaStatus

__all__ = ["register"]

db_app = typer.Typer(
    help="The store's schema (a SQLite file or a PostgreSQL database): its version and tables; apply pending steps.",
    no_args_is_help=True,
)


@db_app.command("status")
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON")] = False,
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Show the schema version, the pending migration steps and every table with its row count."""
    from afi.app.db import store_status

    path = resolve_db(db, create=False)
    with afi_errors():
        found = store_status(path)
    workspace = resolve_root(root, path, create=False)
    if as_json:
        typer.echo(json.dumps({**found.as_json(), "root": str(workspace)}, indent=2))
        return
    _print_status(found, workspace)


def _out() -> Console:
    return stdout(wide=True)


def _print_status(found: SchemaStatus, workspace: Path) -> None:
    from rich.table import Column, Table

    _out().print(f"store: {found.path}{'' if found.exists else ' (not created yet)'}", markup=False)
    _out().print(f"root: {workspace}", markup=False)
    note = " (newer than this afi: upgrade afi-memory)" if found.newer else ""
    _out().print(f"schema version: {found.version} (this afi knows {found.latest}){note}", markup=False)
    pending = ", ".join(f"{number} {name}" for number, name in found.pending) or "none"
    _out().print(f"pending: {pending}" + (" (afi db migrate applies them)" if found.pending else ""), markup=False)
    for step in found.applied:
        _out().print(f"applied: {step.number} {step.name} at {step.applied_at}", markup=False)
    if found.tables:
        table = Table(Column("table", no_wrap=True), "kind", Column("rows", justify="right"))
        for row in found.tables:
            table.add_row(row.name, row.kind, str(row.rows))
        _out().print(table)


@db_app.command("migrate")
def migrate(db: DbOption = None, root: RootOption = None) -> None:
    """Apply the pending migration steps (a new file gets every table); say what was done.

    ``--root`` is accepted like on every command that opens the store; the schema does not use it.
    """
    from afi.app.db import migrate_store
    from afi.storage.database import store_label

    path = resolve_db(db)
    with afi_errors():
        before, applied = migrate_store(path)
    shown = store_label(path)
    if not applied:
        _out().print(f"{shown}: already at schema version {before}; nothing to do", markup=False)
        return
    for step in applied:
        _out().print(f"applied step {step.number}: {step.name}", markup=False)
    _out().print(f"{shown}: schema version {before} -> {applied[-1].number}", markup=False)


@db_app.command("copy")
def copy(
    source: Annotated[str, typer.Option("--from", help="The store to copy: a SQLite file or a postgresql:// URL")],
    destination: Annotated[
        str, typer.Option("--to", help="An empty store to copy into: a new SQLite file or a postgresql:// URL")
    ],
    batch: Annotated[int, typer.Option(min=1, max=100_000, help="Rows per transaction")] = 2000,
) -> None:
    """Copy a whole store to the other engine (SQLite to PostgreSQL, or back), then check every table.

    An interrupted copy goes on where it stopped when run again with the same --from and --to. The
    workspace's files stay where they are: point the destination's --root at the same folder.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Column, Table

    from afi.app.dbcopy import CopyPlan, copy_store, verify_copy
    from afi.storage.database import store_label

    plan = CopyPlan(resolve_db(source), resolve_db(destination), batch=batch)
    columns = (TextColumn("{task.description:<16}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with afi_errors(), Progress(*columns, console=_out(), transient=False) as progress:
        tasks: dict[str, TaskID] = {}

        def advance(table: str, done: int, total: int) -> None:
            if table not in tasks:
                tasks[table] = progress.add_task(table, total=max(total, 1))
            progress.update(tasks[table], completed=done if total else 1, total=max(total, 1))

        copy_store(plan, advance)
        checks = verify_copy(plan)
    table = Table("table", Column("rows", justify="right"), "checksum (sha-256)", "")
    for check in checks:
        table.add_row(check.name, str(check.destination_rows), check.destination_sha256[:16], "ok" if check.ok else
                      f"DIFFERS (source {check.source_rows} rows, {check.source_sha256[:16]})")  # fmt: skip
    _out().print(table)
    if not all(check.ok for check in checks):
        _out().print(
            "afi: the copy differs from its source (see above): was the source written to during the copy? "
            "Stop its writers and copy again into a new, empty destination",
            markup=False,
        )
        raise typer.Exit(1)
    _out().print(
        f"copied {store_label(plan.source)} -> {store_label(plan.destination)}; every table checked", markup=False
    )


@db_app.command("reembed")
def reembed(
    embedder: Annotated[
        str,
        typer.Option(
            "--embedder",
            help="The embedder to move the vectors to: hash, minilm, or a name a store records (hash-fnv1a-384)",
        ),
    ],
    batch: Annotated[int, typer.Option(min=1, max=100_000, help="Notes per transaction")] = 256,
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Re-embed every note of the store with another embedder, then swap the vectors in at once.

    The notes are embedded a batch a transaction beside the vectors in use, so the store serves and
    takes writes meanwhile; one last transaction embeds what was written since, swaps every vector
    and records the new embedder. An interrupted run goes on where it stopped when run again. Restart
    the processes that have the store open afterwards: they refuse to search with the old embedder.
    ``--root`` is accepted like on every command that opens the store; the vectors do not use it.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from afi.app.db import embedder_named, reembed_store
    from afi.storage.database import store_label

    path = resolve_db(db, create=False)
    columns = (TextColumn("{task.description:<16}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    progress = Progress(*columns, console=_out(), transient=False)
    tasks: dict[str, TaskID] = {}

    def advance(phase: str, done: int, total: int) -> None:
        if not tasks:
            progress.start()  # at the first step: a store with nothing to do shows no bars
        if phase not in tasks:
            tasks[phase] = progress.add_task(phase, total=max(total, 1))
        progress.update(tasks[phase], completed=done if total else 1, total=max(total, 1))

    with afi_errors():
        chosen = embedder_named(embedder)  # before the store is opened: an unknown name writes nothing
        try:
            moved = reembed_store(path, chosen, batch=batch, progress=advance)
        finally:
            if tasks:
                progress.stop()
    shown = store_label(path)
    if moved.discarded is not None:
        _out().print(f"{shown}: dropped the unfinished move to {moved.discarded!r}", markup=False, soft_wrap=True)
    if not moved.swapped:
        _out().print(f"{shown}: already on embedder {moved.embedder!r} ({moved.dims} dims); nothing to do",
                     markup=False, soft_wrap=True)  # fmt: skip
        return
    _out().print(
        f"{shown}: {moved.notes} notes re-embedded, {moved.before!r} ({moved.before_dims} dims) -> "
        f"{moved.embedder!r} ({moved.dims} dims); {moved.resumed} staged by an earlier run, {moved.caught_up} "
        "written or changed meanwhile",
        markup=False,
        soft_wrap=True,  # one line however long the store's name: scripts and logs keep it whole
    )


def register(app: typer.Typer) -> None:
    """Add ``afi db …`` to ``app``."""
    app.add_typer(db_app, name="db")
