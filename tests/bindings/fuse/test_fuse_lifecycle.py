"""Mount lifecycle: signals unmount, a crash leaves nothing behind, bad mountpoints are named clearly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import warm
from tests.support.fuse import AFI, afi_mount, needs_fuse, unmount, wait_unmounted

pytestmark = needs_fuse

# A bare pyfuse3 filesystem mounted WITHOUT auto_unmount: killing it leaves a stale mount, as a crash
# of an older or foreign FUSE process would.
_BARE = """
import sys, pyfuse3, trio
pyfuse3.init(pyfuse3.Operations(), sys.argv[1], set(pyfuse3.default_options))
print("up", flush=True)
trio.run(pyfuse3.main)
"""


def _store(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "afi.db", tmp_path / "files"


def _mount_cli(mountpoint: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    db, root = _store(tmp_path)
    cmd = [*AFI, "mount", str(mountpoint), "--db", str(db), "--root", str(root), *args]
    return warm.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_unmounts_and_exits_cleanly(tmp_path: Path, signum: int) -> None:
    with afi_mount(tmp_path / "m", *_store(tmp_path)) as mount:
        assert os.path.ismount(mount.path)
        mount.process.send_signal(signum)
        assert mount.process.wait(20) == 0
        assert not os.path.ismount(mount.path)


def test_a_killed_mount_leaves_no_mount_and_the_next_mount_reuses_the_folder(tmp_path: Path) -> None:
    with afi_mount(tmp_path / "m", *_store(tmp_path)) as mount:
        (mount.path / "facts" / "kept.md").write_text("Survives a crash.\n")
        mount.process.kill()
        mount.process.wait(10)
        assert wait_unmounted(mount.path), "a killed afi mount left its mount behind"
    with afi_mount(tmp_path / "m", *_store(tmp_path)) as again:
        assert "Survives a crash." in (again.path / "facts" / "kept.md").read_text()


def test_a_stale_mount_is_detected_and_the_fix_is_named(tmp_path: Path) -> None:
    stale = tmp_path / "stale"
    stale.mkdir()
    bare = subprocess.Popen([sys.executable, "-c", _BARE, str(stale)], stdout=subprocess.PIPE, text=True)
    try:
        assert bare.stdout is not None and bare.stdout.readline().strip() == "up"
        bare.kill()
        bare.wait(10)
        with pytest.raises(OSError):
            os.stat(stale)  # ENOTCONN: the mount is stale
        done = _mount_cli(stale, tmp_path, "-f")
        assert done.returncode == 2
        assert "stale FUSE mount" in done.stderr and f"fusermount3 -u {stale}" in done.stderr
    finally:
        if bare.stdout is not None:
            bare.stdout.close()
        subprocess.run(["fusermount3", "-u", "-z", str(stale)], capture_output=True)
    with afi_mount(stale, *_store(tmp_path)) as mount:
        assert "facts" in os.listdir(mount.path)


def test_a_missing_mountpoint_is_named(tmp_path: Path) -> None:
    done = _mount_cli(tmp_path / "nowhere", tmp_path, "-f")
    assert done.returncode == 2 and "does not exist" in done.stderr and "mkdir -p" in done.stderr


def test_a_busy_mountpoint_is_named(tmp_path: Path) -> None:
    with afi_mount(tmp_path / "m", *_store(tmp_path)) as mount:
        done = _mount_cli(mount.path, tmp_path, "-f")
        assert done.returncode == 2 and "busy" in done.stderr
        assert "facts" in os.listdir(mount.path), "the refused second mount disturbed the first"


def test_a_non_empty_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "mine.txt").write_text("not to be hidden")
    done = _mount_cli(tmp_path / "m", tmp_path, "-f")
    assert done.returncode == 2 and "not empty" in done.stderr
    assert not os.path.ismount(tmp_path / "m")


def test_without_foreground_it_returns_once_mounted(tmp_path: Path) -> None:
    mountpoint = tmp_path / "m"
    mountpoint.mkdir()
    try:
        done = _mount_cli(mountpoint, tmp_path)
        assert done.returncode == 0 and done.stdout.startswith("afi: mounted / at ")
        assert os.path.ismount(mountpoint) and "facts" in os.listdir(mountpoint)
    finally:
        unmount(mountpoint)
    assert wait_unmounted(mountpoint)


def test_mount_has_help() -> None:
    done = warm.run([*AFI, "mount", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    for option in ("--ro", "--token", "--subtree", "--foreground", "--db", "--root"):
        assert option in done.stdout
