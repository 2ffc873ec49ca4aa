"""``afi gc --keep-days N [--space S] [--dry-run]``: drop file versions, unused blobs and note versions
retired more than N days ago, and compact the notes' change log (providers/memory/gc.py says what
stays exact). Every space unless ``--space`` names one; the store is opened as its local owner, the
run is locked and audited like a write (a dry run changes nothing and is not audited). An AfiError
becomes ``afi: <path>: <code>: <message>`` and exit 2.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from .errors import afi_errors
from .options import DbOption, RootOption, resolve_store

__all__ = ["register"]


def gc(
    keep_days: Annotated[int, typer.Option("--keep-days", help="Keep every instant of the last N days exact")],
    space: Annotated[str | None, typer.Option("--space", help="Only this space (default: every space)")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would go; change nothing")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON")] = False,
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Drop versions retired more than N days ago (legal holds kept) and compact the change log."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from afi.app.local import local_owner, open_provider

    columns = (TextColumn("{task.description:<32}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with afi_errors(), Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        task = progress.add_task("gc", total=None)

        def advance(stage: str, done: int, total: int) -> None:
            progress.update(task, description=stage, completed=done, total=total)

        provider = open_provider(*resolve_store(db, root))
        report = provider.gc(local_owner(space or "default"), keep_days, every_space=space is None,
                             dry_run=dry_run, progress=advance)  # fmt: skip
    if as_json:
        typer.echo(json.dumps(asdict(report), indent=2))
        return
    verb = "would drop" if dry_run else "dropped"
    typer.echo(
        f"{verb}, in {len(report.spaces)} space(s), what was retired before {report.boundary}: "
        f"{report.file_versions} file versions, {report.blobs} blobs ({report.bytes_freed} bytes), "
        f"{report.note_versions} note versions, {report.change_rows} change-log rows"
    )


def register(app: typer.Typer) -> None:
    """Add ``afi gc`` to ``app``."""
    app.command("gc")(gc)
