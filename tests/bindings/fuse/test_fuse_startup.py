"""Starting a mount does each piece of work once: the command that detaches loads neither pyfuse3, trio
nor the provider (the mount it leaves running does), and the key check loads no HTTP or JWT library."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.fuse import needs_fuse, unmount

# Loaded by the mount itself, never by the process that waits for it to be up.
HEAVY = ("pyfuse3", "trio", "afi.providers.memory", "afi.bindings.fuse.ops", "afi.app.local")


def _imported(stderr: str) -> set[str]:
    """Given ``python -X importtime``'s output, return the names of the modules it imported."""
    return {match.group(1) for match in re.finditer(r"^import time:.*\|\s*(\S+)\s*$", stderr, re.MULTILINE)}


@needs_fuse
def test_the_detaching_command_loads_nothing_the_mount_needs(tmp_path: Path) -> None:
    mountpoint = tmp_path / "m"
    mountpoint.mkdir()
    cmd = [sys.executable, "-X", "importtime", "-c", "from afi.cli import main; main()", "mount", str(mountpoint)]
    cmd += ["--db", str(tmp_path / "afi.db"), "--root", str(tmp_path / "files")]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.startswith("afi: mounted / at "), done.stderr[-2000:]
        assert "facts" in (p.name for p in mountpoint.iterdir())
    finally:
        unmount(mountpoint)
    loaded = _imported(done.stderr)
    assert "afi.cli" in loaded  # the output is the parent's import log
    assert sorted(name for name in HEAVY if name in loaded) == []


def test_checking_a_key_loads_no_http_or_jwt_library() -> None:
    """A mount's --token (and the CLI) checks an API key against the store: PyJWT and httpx are for
    an external issuer's tokens only, and load with the first one."""
    code = "import sys, afi.auth.keys; print(sorted(m for m in ('httpx', 'jwt') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
