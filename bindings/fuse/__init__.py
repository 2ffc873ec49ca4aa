"""The FUSE binding: the filesystem operations (:class:`AfiFS`) and the mount that serves them.

The names load on first use (PEP 562): ``afi mount`` checks its folder (:mod:`.mountpoint`) before it
detaches, without pyfuse3, trio or the operations.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .held import HeldFolder
    from .mount import serve_mount
    from .mountpoint import MountError, check_mountpoint
    from .ops import AfiFS

__all__ = ["AfiFS", "HeldFolder", "MountError", "check_mountpoint", "serve_mount"]

_HOME = {
    "AfiFS": "ops",
    "HeldFolder": "held",
    "MountError": "mountpoint",
    "check_mountpoint": "mountpoint",
    "serve_mount": "mount",
}


def __getattr__(name: str) -> Any:
    """Given a public name, import its module and return it."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{home}", __name__), name)
