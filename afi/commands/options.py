"""Options every command that opens the store shares (``--db``/``AFI_DB``, ``--root``/``AFI_ROOT``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["DbOption", "RootOption", "SpaceOption", "resolve_db", "resolve_root", "resolve_store"]

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")  # two letters at least: C:/… is a Windows path
_SQLITE = "sqlite:///"

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar="AFI_DB",
        help="The store: a SQLite file (or sqlite:///file), or a postgresql://user:password@host/database URL "
        "[default: ~/.local/share/afi/afi.db]",
    ),
]
RootOption = Annotated[
    Path | None,
    typer.Option(
        "--root",
        envvar="AFI_ROOT",
        help="Workspace root, one folder per space [default: the one the store recorded; for a new store "
        "~/.local/share/afi/files beside the default store, <name>.files/ beside any other SQLite file]",
    ),
]
SpaceOption = Annotated[str, typer.Option("--space", envvar="AFI_SPACE", help="Memory space to use")]


def resolve_db(db: str | Path | None, *, create: bool = True) -> Path | str:
    """Given the ``--db`` value, return the store: a PostgreSQL URL as given, or a SQLite file path
    (its folder created unless ``create`` is False)."""
    from ..config import default_data_dir
    from ..storage.database import is_postgres_url

    if db is not None and is_postgres_url(str(db)):
        return str(db)
    if db is not None and _URL.match(str(db)):
        db = _sqlite_path(str(db))
    path = (Path(db) if db is not None else default_data_dir() / "afi.db").expanduser()
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _sqlite_path(url: str) -> str:
    """Given a ``--db`` that looks like a URL, return the SQLite file a ``sqlite:///`` URL names
    (``sqlite:///afi.db`` relative, ``sqlite:////srv/afi.db`` absolute, as SQLAlchemy reads them).

    Raises:
        typer.BadParameter: the URL of an engine afi does not speak (it is not taken for a file name).
    """
    if url.startswith(_SQLITE) and len(url) > len(_SQLITE):
        return url[len(_SQLITE) :]
    scheme = url.split(":", 1)[0]
    raise typer.BadParameter(
        f"{scheme}:// is not a store afi can open. Supported engines: SQLite (a file path such as ./afi.db, "
        "or sqlite:///afi.db) and PostgreSQL (postgresql://user:password@host/database).",
        param_hint="'--db'",
    )


def resolve_root(root: Path | None, db: Path | str, *, create: bool = True) -> Path:
    """Given the ``--root`` value and the store (from :func:`resolve_db`), return the store's workspace
    root: ``--root`` when given (recorded by a store that has none yet), else the one the store recorded,
    else its default (see :mod:`afi.app.workspace`); created unless ``create`` is False."""
    from ..app.workspace import workspace_root

    return workspace_root(db, root, create=create)


def resolve_store(db: str | Path | None, root: Path | None) -> tuple[Path | str, Path]:
    """Given ``--db`` and ``--root``, return the store and its workspace root (see :func:`resolve_root`)."""
    store = resolve_db(db)
    return store, resolve_root(root, store)
