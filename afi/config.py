"""Where the store lives by default, shared by every command so all doors open one store."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_data_dir", "default_db", "default_root"]


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/afi`` (``~/.local/share/afi``): the per-user data directory."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "afi"


def default_db() -> Path:
    """The embedded SQLite store: ``AFI_DB`` or ``<data dir>/afi.db``."""
    env = os.environ.get("AFI_DB")
    return Path(env) if env else default_data_dir() / "afi.db"


def default_root() -> Path:
    """The workspace root (one folder per space below it): ``AFI_ROOT`` or ``<data dir>/files``."""
    env = os.environ.get("AFI_ROOT")
    return Path(env) if env else default_data_dir() / "files"
