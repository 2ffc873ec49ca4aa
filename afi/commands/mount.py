"""``afi mount MOUNTPOINT``: the memory as a directory (the FUSE binding), until unmounted or signalled."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .errors import afi_errors, stderr
from .options import DbOption, RootOption, resolve_store

__all__ = ["register"]


def _fail(message: str) -> typer.Exit:
    stderr().print(f"afi: mount: {message}", markup=False, soft_wrap=True)
    return typer.Exit(2)


def mount(
    mountpoint: Annotated[Path, typer.Argument(help="An empty folder to show the memory in")],
    db: DbOption = None,
    root: RootOption = None,
    ro: Annotated[bool, typer.Option("--ro", help="Read-only: every change is refused (EROFS)")] = False,
    token: Annotated[
        Path | None, typer.Option("--token", help="File holding the API key to mount as (its principal and space)")
    ] = None,
    subtree: Annotated[str, typer.Option("--subtree", help="Show only this AFI folder, e.g. /facts")] = "/",
    foreground: Annotated[bool, typer.Option("--foreground", "-f", help="Stay in the foreground (logs here)")] = False,
    timeout: Annotated[
        float,
        typer.Option(
            help="Seconds the kernel may cache names and attributes (changes made through AFI still show at once)"
        ),
    ] = 10.0,
) -> None:
    """Mount the memory at MOUNTPOINT: ls, cat, grep -r, find, vim, cp, mv and rm work in it.

    Search through the control file /.afi/search. Unmount with 'fusermount3 -u MOUNTPOINT', Ctrl-C or SIGTERM.

    Without -f it detaches once mounted and logs to <store file>.mount.log, beside the store.
    """
    secret = _read_token(token)
    if not foreground:  # the mount below checks MOUNTPOINT and says what is wrong with it
        _detach()
        return
    from afi.app.mount import MountError, check_mountpoint

    try:
        where = check_mountpoint(mountpoint)
    except MountError as err:
        raise _fail(str(err)) from None
    _serve(where, *resolve_store(db, root), secret, ro=ro, subtree=subtree, timeout=timeout)


def _read_token(token: Path | None) -> str | None:
    if token is None:
        return None
    try:
        text = token.expanduser().read_text().strip()
    except OSError as err:
        raise _fail(f"cannot read the token file {token}: {err.strerror}") from None
    if not text:
        raise _fail(f"the token file {token} is empty")
    return text


def _detach() -> None:
    """Run this same command in the foreground of a new session; return once it has mounted (its
    refusal, a bad MOUNTPOINT or store, is relayed with its exit code)."""
    from afi.app.mount_handshake import DETACHED_ENV, MOUNTED

    argv = [sys.executable, "-c", "from afi.cli import main; main()", *sys.argv[1:], "--foreground"]
    env = {**os.environ, DETACHED_ENV: "1"}
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env
    )
    assert proc.stdout is not None and proc.stderr is not None
    for line in proc.stdout:
        if line.startswith(MOUNTED):
            typer.echo(line.rstrip("\n"))
            return
    code = proc.wait()
    sys.stderr.write(proc.stderr.read())
    raise typer.Exit(code or 2)


def _serve(
    where: Path, db: Path | str, root: Path, secret: str | None, *, ro: bool, subtree: str, timeout: float
) -> None:
    from afi.app.mount import prepare_mount

    with afi_errors():
        prepared = prepare_mount(where, db, root, secret, ro=ro, subtree=subtree, timeout=timeout)
    prepared.run()


def register(app: Any) -> None:
    """Add ``afi mount`` to ``app``."""
    app.command("mount")(mount)
