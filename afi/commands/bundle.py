"""``afi export`` and ``afi import``: a store's spaces as a lossless, git-friendly bundle folder, and back.

``afi import`` also reads what users already have (a Markdown folder or Obsidian vault, the MCP
memory server's JSONL, a mem0 export, a Claude ``/memories`` folder): a source that is not an afi
bundle goes to the foreign importers. Progress bars go to stderr; an AfiError becomes
``afi: <path>: <code>: <message>`` and exit 2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from .errors import afi_errors, stderr
from .options import DbOption, RootOption, resolve_store

__all__ = ["register"]


class ImportFormat(StrEnum):
    auto = "auto"
    bundle = "bundle"
    markdown = "markdown"
    obsidian = "obsidian"
    mcp_memory = "mcp-memory"
    mem0 = "mem0"
    claude_memories = "claude-memories"


@contextmanager
def _progress() -> Iterator[Callable[[str, int, int], None]]:
    """A rich progress bar per stage on stderr, fed by ``(stage, done, total)``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description:<24}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=stderr(), transient=False) as progress:
        tasks: dict[str, TaskID] = {}

        def advance(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(stage, total=max(total, 1))
            progress.update(tasks[stage], completed=done if total else 1, total=max(total, 1))

        yield advance


def export(
    out: Annotated[Path, typer.Option("-o", "--output", help="The bundle folder to write (new, or empty)")],
    space: Annotated[
        list[str] | None, typer.Option("--space", metavar="SPACE", help="A space to export (repeat; default: all)")
    ] = None,
    as_of: Annotated[str | None, typer.Option("--as-of", help="Export the state at this ISO 8601 instant")] = None,
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Write the store's spaces as a bundle: notes with every version, working blocks, ledger sessions,
    snapshots and workspace files (and their kept versions), with a manifest of checksums."""
    from afi.app.bundle import export_spaces

    with afi_errors(), _progress() as progress:
        manifest = export_spaces(*resolve_store(db, root), out.expanduser(), spaces=space or None, as_of=as_of,
                                 progress=progress)  # fmt: skip
    for name, counts in manifest["spaces"].items():
        said = ", ".join(f"{n} {what.replace('_', ' ')}" for what, n in counts.items() if n) or "nothing"
        typer.echo(f"exported space {name}: {said}")
    typer.echo(f"wrote {out} ({len(manifest['checksums']) + 1} files)")


def import_(
    path: Annotated[Path, typer.Argument(help="An afi bundle folder, or a source in a foreign format")],
    space: Annotated[
        str | None, typer.Option("--space", metavar="SPACE", help="The space to import into (see above)")
    ] = None,
    fmt: Annotated[ImportFormat, typer.Option("--format", help="The source's format")] = ImportFormat.auto,
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Import a bundle into empty spaces (each under its own name; with --space, the bundle's only
    space, or the one of that name, goes there), or a foreign source into --space (default: default).
    Nothing is written unless the whole source checks out."""
    from afi.app.bundle import import_source

    with afi_errors(), _progress() as progress:
        result = import_source(*resolve_store(db, root), path.expanduser(), space=space, progress=progress,
                               fmt=None if fmt is ImportFormat.auto else fmt.value)  # fmt: skip
    typer.echo(result.summary())


def register(app: typer.Typer) -> None:
    """Add ``afi export`` and ``afi import`` to ``app``."""
    app.command("export")(export)
    app.command("import")(import_)
