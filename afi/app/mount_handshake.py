"""How ``afi mount`` detaches: it runs itself again in the foreground of a new session, with
:data:`DETACHED_ENV` set, and returns once that mount prints a line starting with :data:`MOUNTED`.

Nothing but these two strings, so the parent that waits loads none of FUSE, trio or the provider.
"""

from __future__ import annotations

from afi.config import DETACHED_ENV

__all__ = ["DETACHED_ENV", "MOUNTED"]

MOUNTED = "afi: mounted "  # the line a mount prints once it is up (a detached parent waits for it)
