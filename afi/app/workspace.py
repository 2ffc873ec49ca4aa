"""Which folder holds a store's workspace files: the store's own, so a new ``--db`` is a new, empty memory.

A store's workspace root is, in order:

1. ``--root`` (or ``AFI_ROOT``) when given; a store created by that command records it, so later
   commands without ``--root`` find the same files;
2. the root the store recorded (``meta.workspace_root``);
3. the default: ``<data dir>/files`` for the default store (``<data dir>/afi.db``) and for a PostgreSQL
   store, and ``<name>.files/`` beside any other SQLite file (``new/store.db`` keeps ``new/store.files/``).

A store made before stores kept their own workspace records that it used the per-user one (schema
step "workspace of older stores"), so nothing it held is hidden by the new default.
"""

from __future__ import annotations

from pathlib import Path

from afi.config import default_data_dir
from afi.errors import InvalidPath
from afi.storage.database import is_postgres_url, open_database
from afi.storage.peek import holds_a_store, peek_meta
from afi.storage.steps import WORKSPACE_STEP

__all__ = ["PER_USER", "ROOT_KEY", "default_root_of", "workspace_root"]

ROOT_KEY = "workspace_root"
PER_USER = "per-user"  # recorded by an older store: the per-user <data dir>/files it always used


def _per_user_root() -> Path:
    return default_data_dir() / "files"


def default_root_of(db: Path | str) -> Path:
    """Given a store that records no root, return its default workspace root (see the module's rules)."""
    if is_postgres_url(db):
        return _per_user_root()
    path = Path(db).expanduser().absolute()
    if path == (default_data_dir() / "afi.db").expanduser().absolute():
        return _per_user_root()
    return path.with_name(f"{path.stem or path.name}.files")


def _recorded(db: Path | str) -> str | None:
    with open_database(db).read() as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (ROOT_KEY,)).fetchone()
    return str(row[0]) if row is not None else None


def _record(db: Path | str, root: Path) -> None:
    with open_database(db).transaction() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (ROOT_KEY, str(root)))


def workspace_root(db: Path | str, root: Path | None, *, create: bool = True) -> Path:
    """Given the store and the ``--root`` value (None when not given), return the workspace root.

    With ``create`` a store this call creates records an explicit root, and the folder is created;
    without, nothing is written (a store that does not exist yet is not created either).

    Raises:
        InvalidPath: the root cannot be created (a file is in the way, or its folder is not writable).
    """
    if not create:
        recorded = peek_meta(db, ROOT_KEY, since_step=WORKSPACE_STEP, before=PER_USER)
    else:
        new = not holds_a_store(db)
        recorded = _recorded(db)
        if new and root is not None and recorded is None:
            _record(db, root.expanduser().absolute())
    if root is not None:
        chosen = root.expanduser().absolute()
    elif recorded == PER_USER:
        chosen = _per_user_root()
    elif recorded:
        chosen = Path(recorded)
    else:
        chosen = default_root_of(db)
    if create:
        try:
            chosen.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InvalidPath(f"cannot create the workspace folder: {err.strerror}", path=str(chosen)) from None
        if not chosen.is_dir():
            raise InvalidPath("the workspace root is not a folder", path=str(chosen))
    return chosen
