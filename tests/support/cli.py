"""Helpers the CLI tests share: the real ``afi`` console script, run over a store file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

AFI = Path(sys.executable).with_name("afi")


def afi(*args: str, db: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "AFI_DB": str(db), "AFI_ROOT": str(db.parent / "files"), "COLUMNS": "200", **(env or {})}
    environ.pop("AFI_SPACE", None)
    return subprocess.run([str(AFI), *args], capture_output=True, text=True, env=environ, timeout=60, check=False)
