"""Helpers the CLI tests share: the real ``afi`` command, run over a store file.

:func:`afi` runs it warm (forked from this worker's launcher, :mod:`tests.support.warm`): a real process
running the real CLI, without Python's start-up and imports each time. :data:`AFI` is the console script a
user runs; a test of start-up itself (imports, ``afi --version``) runs it with :mod:`subprocess`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support import warm
from tests.support.warm import AFI

__all__ = ["AFI", "afi"]


def afi(
    *args: str, db: Path, env: dict[str, str] | None = None, cold: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``afi ARGS`` over ``db`` (its workspace root beside it); ``cold``: exec the console script, as a
    user's shell does (a test of start-up itself)."""
    environ = {**os.environ, "AFI_DB": str(db), "AFI_ROOT": str(db.parent / "files"), "COLUMNS": "200", **(env or {})}
    environ.pop("AFI_SPACE", None)
    run = subprocess.run if cold else warm.run
    return run([str(AFI), *args], capture_output=True, text=True, env=environ, timeout=60, check=False)
