"""``afi ls [-l] [PATH]`` and ``afi cat PATH``: a quick look at the tree without curl or a mount.

Each opens the store as the local owner of ``--space`` and calls one provider verb: ``ls`` is
``list`` (every page; a file lists itself, as ls does), ``cat`` is ``read``, its bytes written to
stdout as they are. An AfiError becomes ``afi: <path>: <code>: <message>`` and exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .errors import afi_errors
from .options import DbOption, RootOption, SpaceOption, resolve_store

__all__ = ["register"]

PathArg = Annotated[str, typer.Argument(help="An AFI path, e.g. /facts or /files/notes/todo.txt")]
_CHUNK = 1 << 20


def _as_owner(db: str | None, root: Path | None, space: str) -> tuple[Any, Any]:
    """The store's provider, and its local owner in ``space`` (whoever runs the CLI on this machine)."""
    from afi.app.local import local_owner, open_provider

    return open_provider(*resolve_store(db, root)), local_owner(space)


def ls(
    path: Annotated[str, typer.Argument(help="An AFI path, e.g. /facts or /files/notes")] = "/",
    long: Annotated[bool, typer.Option("-l", "--long", help="Also show type, size in bytes and mtime")] = False,
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """List a folder's entries by name (a file: itself); -l adds type, size and modification time."""
    with afi_errors():
        provider, caller = _as_owner(db, root, space)
        entry = provider.stat(caller, path)
        entries = [entry]
        if entry.type == "directory":
            entries, cursor = [], None
            while True:
                page = provider.list(caller, path, cursor=cursor)
                entries += page.entries
                cursor = page.next_cursor
                if cursor is None:
                    break
        for each in entries:
            name = each.path.rsplit("/", 1)[-1] or each.path
            if entry.type == "directory" and each.type == "directory":
                name += "/"
            elif entry.type != "directory":
                name = each.path
            if long:
                kind = {"directory": "d", "symlink": "l"}.get(each.type, "-")
                typer.echo(f"{kind} {each.size:>10} {each.mtime} {name}")
            else:
                typer.echo(name)


def cat(
    path: PathArg,
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Write a file's (or note's) bytes to stdout, as they are."""
    with afi_errors():
        provider, caller = _as_owner(db, root, space)
        offset, out = 0, sys.stdout.buffer
        while True:
            result = provider.read(caller, path, offset=offset, length=_CHUNK)
            out.write(result.data)
            offset += len(result.data)
            if result.eof or not result.data:
                break
        out.flush()


def register(app: typer.Typer) -> None:
    """Add ``ls`` and ``cat`` to ``app``."""
    app.command("ls")(ls)
    app.command("cat")(cat)
