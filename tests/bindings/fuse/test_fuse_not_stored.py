"""Issue 29 through the FUSE door: what a shell writes is never silently dropped or hidden.

A name that is not UTF-8 is refused when it would be made (EILSEQ), and links are refused (EPERM).
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fuse import Mount, afi_mount, needs_fuse

pytestmark = needs_fuse


def sh(script: str, cwd: Path, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    """Run ``script`` in bash in ``cwd`` (``$1``… are ``args``); return what it did."""
    argv: list[str | bytes] = ["bash", "-c", script, "sh", *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, timeout=60)


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "afi.db", tmp_path / "files"


@pytest.fixture
def mount(store: tuple[Path, Path], tmp_path: Path) -> Iterator[Mount]:
    with afi_mount(tmp_path / "m", *store) as mounted:
        yield mounted


BAD_NAMES = [b"bad\xfe.md", b"caf\xe9.md", b"\xed\xa0\x80.md", b"ok\xc3.md", b"\xff"]


def test_a_name_that_is_not_utf8_is_refused_where_it_would_be_made(mount: Mount, store: tuple[Path, Path]) -> None:
    root = os.fsencode(mount.path)
    (mount.path / "files" / "plain.txt").write_text("plain\n")
    tried = 0
    for name in BAD_NAMES:
        for area in (b"facts", b"files"):
            path = root + b"/" + area + b"/" + name
            done = sh('echo hi > "$1"; echo $?', mount.path, path)
            assert done.stdout == b"1\n" and b"Invalid or incomplete multibyte" in done.stderr, (path, done)
            attempts = [
                (os.mkdir, (path,)),
                (os.rename, (root + b"/files/plain.txt", path)),
                (os.symlink, (b"plain.txt", path)),
                (os.link, (root + b"/files/plain.txt", path)),
            ]
            for call, args in attempts:
                tried += 1
                with pytest.raises(OSError) as caught:
                    call(*args)  # type: ignore[operator]
                assert caught.value.errno == errno.EILSEQ, (call.__name__, path)
            assert name not in os.listdir(root + b"/" + area)
    assert tried == 4 * 2 * len(BAD_NAMES)
    assert (mount.path / "files" / "plain.txt").read_text() == "plain\n"


def test_symlinks_and_hard_links_are_refused_with_eperm(mount: Mount) -> None:
    files = mount.path / "files"
    (files / "target.txt").write_text("target\n")
    with pytest.raises(OSError) as caught:
        os.symlink("target.txt", files / "link")
    assert caught.value.errno == errno.EPERM
    with pytest.raises(OSError) as caught:
        os.link(files / "target.txt", files / "hard")
    assert caught.value.errno == errno.EPERM
    refused = sh("ln -s target.txt files/link", mount.path)
    assert refused.returncode == 1 and b"Operation not permitted" in refused.stderr
    assert sorted(os.listdir(files)) == ["target.txt"]
