"""The CLI's rich consoles, each made on first use.

Importing rich costs tens of milliseconds that a command printing plain lines (``afi --version``,
``afi ls``, ``afi cat``) need not pay, so no command module makes a console when it is imported.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["stderr", "stdout"]


@cache
def stderr() -> Console:
    """Return the console on stderr (messages, warnings, progress bars)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


@cache
def stdout(*, wide: bool = False) -> Console:
    """Return the console on stdout; ``wide``: 200 columns when piped, so a table's ids and scores are
    never folded for a script or a test reading it."""
    from rich.console import Console

    return Console(highlight=False, width=None if not wide or sys.stdout.isatty() else 200)
