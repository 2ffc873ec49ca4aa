"""``afi mount MOUNTPOINT``: the memory as a directory (the FUSE binding), until unmounted or signalled."""

from __future__ import annotations

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
    from afi.app.mount import MountError, check_mountpoint

    try:
        where = check_mountpoint(mountpoint)
    except MountError as err:
        raise _fail(str(err)) from None
    secret = _read_token(token)
    if not foreground:
        _detach()
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
    """Go on in a forked child of a new session (returning there); here, exit once it has mounted."""
    from afi.app.mount import detach

    code = detach()
    if code is not None:
        raise typer.Exit(code)


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
