"""Editing notes through a real ``sshfs`` mount of a real ``afi ssh``: ``sed -i``, editor saves, a read
right after a save, and the memory-only files (names the provider refuses) an SFTP session keeps.

sshfs runs with its default caching: it and the kernel keep the attributes the server reports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from afi.clients.ssh import SshClient
from afi.errors import AfiError
from tests.support.ssh import SshServer

pytestmark = pytest.mark.skipif(
    shutil.which("sshfs") is None or shutil.which("fusermount3") is None or not os.access("/dev/fuse", os.W_OK),
    reason="sshfs (Debian package sshfs) or /dev/fuse is not available",
)


@contextmanager
def sshfs(ssh_served: SshServer, mountpoint: Path, key: str = "writer") -> Iterator[Path]:
    """Mount the server's tree with sshfs (its default caching options) at ``mountpoint``; always unmount."""
    mountpoint.mkdir()
    options = (
        f"IdentityFile={ssh_served.keys[key]},StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes,"
        "IdentitiesOnly=yes,fsname=afi-sftp"
    )
    subprocess.run(
        ["sshfs", "-p", str(ssh_served.port), "-o", options, "127.0.0.1:/", str(mountpoint)], check=True, timeout=30
    )
    try:
        yield mountpoint
    finally:
        subprocess.run(["fusermount3", "-u", str(mountpoint)], check=True, timeout=30)


@pytest.fixture(scope="module")
def mnt(ssh_served: SshServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with sshfs(ssh_served, tmp_path_factory.mktemp("sshfs") / "m") as mounted:
        yield mounted


def sh(script: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a shell script in the mount, as a user would."""
    done = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, f"{script!r} failed ({done.returncode}): {done.stderr}"
    return done


def body(note: str) -> str:
    """The content of a rendered note: what follows its front matter."""
    assert note.startswith("---\n"), note
    return note.split("\n---\n", 1)[1]


def stored(ssh_served: SshServer, path: str) -> str:
    """What the server stores at ``path``, read over another connection."""
    with SshClient(port=ssh_served.port, identity=ssh_served.keys["reader"]) as reader:
        return reader.read(path).data.decode()


def test_sed_in_place_edits_a_note(ssh_served: SshServer, mnt: Path) -> None:
    sh("echo 'The deploy window is Tuesday' > facts/deploy.md", mnt)
    sh("sed -i 's/Tuesday/Thursday/' facts/deploy.md", mnt)
    assert body(sh("cat facts/deploy.md", mnt).stdout) == "The deploy window is Thursday\n"
    assert body(stored(ssh_served, "/facts/deploy.md")) == "The deploy window is Thursday\n"
    names = sh("ls -a facts", mnt).stdout.split()
    assert names.count("deploy.md") == 1 and not [n for n in names if n.startswith("sed")], names


def test_a_save_that_writes_a_temp_file_and_renames_it_stores_the_note(ssh_served: SshServer, mnt: Path) -> None:
    sh("echo 'pick the red one' > facts/save.md", mnt)
    sh("printf 'pick the blue one\\n' > facts/.save.md.tmp && mv facts/.save.md.tmp facts/save.md", mnt)
    assert body(sh("cat facts/save.md", mnt).stdout) == "pick the blue one\n"
    assert body(stored(ssh_served, "/facts/save.md")) == "pick the blue one\n"
    assert ".save.md.tmp" not in sh("ls -a facts", mnt).stdout.split()


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
def test_vim_saves_a_note_and_a_read_right_after_shows_it(mnt: Path) -> None:
    sh("echo 'the meeting is at noon' > facts/vim.md", mnt)
    for before, after in (("noon", "one"), ("one", "two"), ("two", "three")):
        seen = sh(f"vim -E -s -c '%s/{before}/{after}/' -c wq facts/vim.md && cat facts/vim.md", mnt).stdout
        assert body(seen) == f"the meeting is at {after}\n"


def test_a_read_right_after_a_save_shows_the_new_bytes(mnt: Path) -> None:
    """A program that stats the file it wrote before closing it is told the size it is stored with:
    sshfs and the kernel keep the size they were told, and a read right after the save stops there."""
    script = """
import os
bad = []
for i in range(12):
    path = f"facts/fresh{i % 3}.md"
    text = f"round {i}: " + "word " * (i % 5) + "\\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.write(fd, text.encode())
    written = os.fstat(fd).st_size
    os.close(fd)
    with open(path) as again:
        seen = again.read()
    if not (seen.startswith("---\\n") and seen.endswith("\\n---\\n" + text)):
        bad.append((i, written, seen[-40:]))
    if os.stat(path).st_size != len(seen.encode()):
        bad.append((i, "stat", os.stat(path).st_size, len(seen.encode())))
print(bad)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=mnt, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr


def test_a_temp_file_is_listed_readable_and_removable_but_never_stored(ssh_served: SshServer, mnt: Path) -> None:
    sh("printf 'scratch\\n' > facts/scratch.txt", mnt)
    assert "scratch.txt" in sh("ls facts", mnt).stdout.split()
    assert sh("cat facts/scratch.txt", mnt).stdout == "scratch\n"
    assert os.stat(mnt / "facts" / "scratch.txt").st_size == len("scratch\n")
    with SshClient(port=ssh_served.port, identity=ssh_served.keys["writer"]) as other, pytest.raises(AfiError):
        other.stat("/facts/scratch.txt")  # held by that session only
    sh("mv facts/scratch.txt facts/scratch2.txt", mnt)  # onto another refused name: still in memory
    assert sh("cat facts/scratch2.txt", mnt).stdout == "scratch\n"
    sh("rm facts/scratch2.txt", mnt)
    assert "scratch2.txt" not in sh("ls facts", mnt).stdout.split()


def test_a_refusal_for_another_reason_stays_a_refusal(ssh_served: SshServer, mnt: Path, tmp_path: Path) -> None:
    sh(": > facts/empty.tmp", mnt)
    refused = sh("mv facts/empty.tmp facts/empty.md", mnt, check=False)
    assert refused.returncode != 0  # an empty note is refused: what it holds, not its name
    assert "empty.tmp" in sh("ls facts", mnt).stdout.split()
    assert "empty.md" not in sh("ls facts", mnt).stdout.split()
    sh("rm facts/empty.tmp", mnt)
    history = sh("echo x > history/sed123", mnt, check=False)
    assert history.returncode != 0 and "Permission denied" in history.stderr, history.stderr
    with sshfs(ssh_served, tmp_path / "ro", key="reader") as read_only:
        denied = sh("echo x > facts/sedABC", read_only, check=False)
        assert denied.returncode != 0 and "Permission denied" in denied.stderr, denied.stderr
        assert "sedABC" not in sh("ls facts", read_only).stdout.split()
