"""Every ``AFI_*`` setting read from the environment, in one place, and passed down from here.

A function per setting reads the environment when it is called (a test or a child process may set
it after import); nothing else in ``afi/``, ``providers/`` or ``bindings/`` reads the environment
(``tests/test_layers.py`` greps for it). The command-line options that fall back on a variable
(``--db``/``AFI_DB``, ``--space``/``AFI_SPACE`` …) are declared with the commands. This module
imports only the standard library: ``afi --version`` reads it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "DETACHED_ENV",
    "default_data_dir",
    "default_db",
    "default_root",
    "embedder_choice",
    "history_max_file_size",
    "max_file_size",
    "mount_detached",
    "parse_size",
    "pg_pool_size",
    "search_threads",
    "space_quota",
    "token",
]

DETACHED_ENV = "AFI_MOUNT_DETACHED"  # set in a mount whose parent returns once it is up
DEFAULT_MAX_FILE_BYTES = 1 << 30
DEFAULT_SPACE_QUOTA_BYTES = 10 << 30
DEFAULT_HISTORY_MAX_FILE_BYTES = 64 << 20
DEFAULT_PG_POOL = 16


def _setting(name: str) -> str | None:
    """Given a variable's name, return its value, or None when it is unset or blank."""
    value = os.environ.get(name)
    return value if value is not None and value.strip() else None


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/afi`` (``~/.local/share/afi``): the per-user data directory."""
    base = _setting("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "afi"


def default_db() -> Path:
    """The embedded SQLite store: ``AFI_DB`` or ``<data dir>/afi.db``."""
    env = _setting("AFI_DB")
    return Path(env) if env else default_data_dir() / "afi.db"


def default_root() -> Path:
    """The workspace root (one folder per space below it): ``AFI_ROOT`` or ``<data dir>/files``."""
    env = _setting("AFI_ROOT")
    return Path(env) if env else default_data_dir() / "files"


def embedder_choice() -> str | None:
    """The embedder asked for (``AFI_EMBEDDER``: ``minilm`` or ``hash``), or None: the store's own, and
    for a new store the default."""
    return _setting("AFI_EMBEDDER")


def token() -> str | None:
    """The API key ``afi mcp`` calls as: ``AFI_TOKEN``, or None for the keyless local owner."""
    return _setting("AFI_TOKEN")


def mount_detached() -> bool:
    """Whether this mount was started by a parent that returns once it is up (``AFI_MOUNT_DETACHED``)."""
    return _setting(DETACHED_ENV) is not None


def max_file_size() -> int:
    """The largest file a space's workspace holds: ``AFI_MAX_FILE_SIZE`` (bytes, or with K/M/G/T), 1 GiB.

    Raises:
        ValueError: a value that is not a size.
    """
    return parse_size(_setting("AFI_MAX_FILE_SIZE"), DEFAULT_MAX_FILE_BYTES)


def space_quota() -> int:
    """The bytes all of a space's files may hold together: ``AFI_SPACE_QUOTA``, 10 GiB.

    Raises:
        ValueError: a value that is not a size.
    """
    return parse_size(_setting("AFI_SPACE_QUOTA"), DEFAULT_SPACE_QUOTA_BYTES)


def history_max_file_size() -> int:
    """The largest file whose versions keep their bytes: ``AFI_HISTORY_MAX_FILE_SIZE``, 64 MiB.

    Raises:
        ValueError: a value that is not a size.
    """
    return parse_size(_setting("AFI_HISTORY_MAX_FILE_SIZE"), DEFAULT_HISTORY_MAX_FILE_BYTES)


def pg_pool_size() -> int:
    """The connections a process holds open to one PostgreSQL store at most: ``AFI_PG_POOL``, 16.

    Raises:
        ValueError: not a positive whole number.
    """
    text = _setting("AFI_PG_POOL")
    if text is None:
        return DEFAULT_PG_POOL
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"AFI_PG_POOL={text!r} is not a number of connections (a whole number from 1)")
    return int(text)


def search_threads() -> int:
    """The worker threads the searches of one server may hold at once: ``AFI_SEARCH_THREADS``, or as
    many as the machine gives this process cores (a value that is not a positive number is ignored)."""
    configured = (_setting("AFI_SEARCH_THREADS") or "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, len(os.sched_getaffinity(0)))


def parse_size(text: str | None, default: int) -> int:
    """Given ``"512M"``, ``"10G"``, ``"4096"`` (or None for ``default``), return a number of bytes.

    Raises:
        ValueError: not a size.
    """
    if text is None or not text.strip():
        return default
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = 1
    if value and value[-1] in "KMGT":
        scale = 1024 ** ("KMGT".index(value[-1]) + 1)
        value = value[:-1]
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{text!r} is not a size: use bytes or a number with K, M, G or T") from None
    if number < 0 or number != number:
        raise ValueError(f"{text!r} is not a size: it must not be negative")
    return int(number * scale)
