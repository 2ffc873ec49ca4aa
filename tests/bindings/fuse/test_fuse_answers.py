"""What the mount answers where a change cannot be made as asked: the errno a person understands, never
a 0 for a change not made (chmod, an emptied note, mkdir in /facts, moves across kinds). What ``touch`` of a
new note makes is in test_fuse_not_stored.py."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fuse import Mount, afi_mount, needs_fuse

pytestmark = needs_fuse


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("fuse-answers")
    return base / "afi.db", base / "files"


@pytest.fixture(scope="module")
def mount(store: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    with afi_mount(tmp_path_factory.mktemp("mnt") / "m", *store) as mounted:
        yield mounted


def sh(script: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, f"{script!r} failed ({done.returncode}): {done.stderr}"
    return done


def stored(store: tuple[Path, Path], path: str) -> str:
    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(*store)
    return str(provider.read(provider.authenticate(None), path).data.decode())


def body(note: str) -> str:
    return note.split("\n---\n", 1)[1]


def test_chmod_to_another_mode_is_eperm_and_the_mode_shown_is_no_change(mount: Mount) -> None:
    sh("echo 'a fact' > facts/mode.md && echo 'a file' > files/mode.txt", mount.path)
    for name in ("facts/mode.md", "files/mode.txt"):
        path = mount.path / name
        with pytest.raises(PermissionError) as caught:
            os.chmod(path, 0o600)
        assert caught.value.errno == errno.EPERM
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
        os.chmod(path, 0o644)  # what cp -p and install -m 644 ask: the mode it has
    refused = sh("chmod +x files/mode.txt", mount.path, check=False)
    assert refused.returncode != 0 and "Operation not permitted" in refused.stderr


def test_emptying_a_note_fails_at_close_and_the_note_stays(mount: Mount, store: tuple[Path, Path]) -> None:
    sh("echo 'keep me' > facts/empty.md", mount.path)
    fd = os.open(mount.path / "facts" / "empty.md", os.O_WRONLY | os.O_TRUNC)
    with pytest.raises(OSError) as caught:
        os.close(fd)
    assert caught.value.errno == errno.EINVAL
    assert mount.logged("/facts/empty.md: not stored: a note cannot be empty: rm it to forget it")
    sh(": > facts/empty.md", mount.path)  # the shell does not look at close; the note stays all the same
    assert body(stored(store, "/facts/empty.md")) == "keep me\n"
    assert body((mount.path / "facts" / "empty.md").read_text()) == "keep me\n"
    # An editor's truncate-then-write is a rewrite; sed -i that would empty it is refused, the note kept
    fd = os.open(mount.path / "facts" / "empty.md", os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"rewritten\n")
    os.close(fd)
    assert body(stored(store, "/facts/empty.md")) == "rewritten\n"
    assert sh("sed -i d facts/empty.md", mount.path, check=False).returncode != 0
    assert body(stored(store, "/facts/empty.md")) == "rewritten\n"
    assert body((mount.path / "facts" / "empty.md").read_text()) == "rewritten\n"


def test_mkdir_in_a_note_folder_is_eperm(mount: Mount) -> None:
    for folder in ("facts/sub", "procedures/sub"):
        with pytest.raises(PermissionError) as caught:
            os.mkdir(mount.path / folder)
        assert caught.value.errno == errno.EPERM


def test_a_move_across_kinds_is_exdev_and_mv_copies_and_deletes(mount: Mount, store: tuple[Path, Path]) -> None:
    sh("echo 'brew the coffee first' > procedures/brew.md && echo 'a plain file' > files/plain.txt", mount.path)
    for source, destination in (("procedures/brew.md", "facts/brew.md"), ("files/plain.txt", "facts/plain.md")):
        with pytest.raises(OSError) as caught:
            os.rename(mount.path / source, mount.path / destination)
        assert caught.value.errno == errno.EXDEV
    sh("mv procedures/brew.md facts/brew.md", mount.path)
    assert "brew.md" in os.listdir(mount.path / "facts") and "brew.md" not in os.listdir(mount.path / "procedures")
    moved = stored(store, "/facts/brew.md")
    assert "kind: fact" in moved and body(moved) == "brew the coffee first\n"
