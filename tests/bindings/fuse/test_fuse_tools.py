"""The FUSE binding through the real tools (ls, cat, grep -r, find, cp, mv, rm, sed -i, vim, echo >>)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fuse import Mount, afi_mount, needs_fuse

pytestmark = needs_fuse


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("fuse-tools")
    return base / "afi.db", base / "files"


@pytest.fixture(scope="module")
def mount(store: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    with afi_mount(tmp_path_factory.mktemp("mnt") / "m", *store) as mounted:
        yield mounted


def sh(script: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a shell script in the mount, as a user would."""
    done = subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, f"{script!r} failed ({done.returncode}): {done.stderr}"
    return done


def provider(store: tuple[Path, Path]) -> Any:
    from afi.providers.memory.provider import MemoryProvider

    return MemoryProvider(*store)


def body(note: str) -> str:
    """The content of a rendered note: what follows its front matter."""
    return note.split("\n---\n", 1)[1]


def test_ls_shows_the_tree_and_the_control_files(mount: Mount) -> None:
    assert {"episodes", "facts", "files", "history", "procedures", "working"} <= set(
        sh("ls", mount.path).stdout.split()
    )
    shown = sh("ls -A .afi", mount.path).stdout.split()
    assert shown == ["at", "manifest.json", "not-stored", "search"]  # at/: the past
    listing = sh("ls -l", mount.path).stdout
    assert "dr-xr-xr-x" in listing and "drwxr-xr-x" in listing  # read-only areas show no w bit


def test_the_manifest_is_a_regular_file_with_the_mount_info(mount: Mount) -> None:
    path = mount.path / ".afi" / "manifest.json"
    manifest = json.loads(sh("cat .afi/manifest.json", mount.path).stdout)
    assert manifest["provider"] == "afi-memory" and manifest["profile"] == 3
    assert manifest["x-fuse"]["mountpoint"] == str(mount.path)
    assert os.stat(path).st_size == len(path.read_bytes())


def test_echo_creates_a_note_and_cat_reads_it_back(mount: Mount) -> None:
    sh("echo 'Alice drinks a flat white' > facts/alice.md", mount.path)
    text = sh("cat facts/alice.md", mount.path).stdout
    assert text.startswith("---\n") and "kind: fact" in text
    assert body(text) == "Alice drinks a flat white\n"
    assert os.stat(mount.path / "facts" / "alice.md").st_size == len(text.encode())


def test_echo_append_adds_to_the_note(mount: Mount) -> None:
    sh("echo 'first' > facts/append.md && echo 'second' >> facts/append.md", mount.path)
    assert body(sh("cat facts/append.md", mount.path).stdout) == "first\nsecond\n"


def test_sed_in_place_edits_a_note(mount: Mount, store: tuple[Path, Path]) -> None:
    sh("echo 'The deploy window is Tuesday' > facts/deploy.md", mount.path)
    sh("sed -i 's/Tuesday/Thursday/' facts/deploy.md", mount.path)
    assert body(sh("cat facts/deploy.md", mount.path).stdout) == "The deploy window is Thursday\n"
    assert sh("ls facts", mount.path).stdout.split().count("deploy.md") == 1
    assert not [n for n in os.listdir(mount.path / "facts") if n.startswith("sed")], "sed's temp file stayed"
    seen = provider(store).read(provider(store).authenticate(None), "/facts/deploy.md").data.decode()
    assert body(seen) == "The deploy window is Thursday\n"


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
def test_vim_edits_and_saves_a_workspace_file_and_a_note(mount: Mount) -> None:
    sh("printf 'alpha\\nbeta\\n' > files/vim.txt && echo 'pick the red one' > facts/vim.md", mount.path)
    sh("vim -E -s -c '%s/beta/gamma/' -c wq files/vim.txt", mount.path)
    sh("vim -E -s -c '%s/red/blue/' -c wq facts/vim.md", mount.path)
    assert (mount.path / "files" / "vim.txt").read_text() == "alpha\ngamma\n"
    assert body((mount.path / "facts" / "vim.md").read_text()) == "pick the blue one\n"


def test_cp_mv_rm_in_the_workspace(mount: Mount) -> None:
    sh("mkdir -p files/docs/deep && printf 'hello\\n' > files/docs/a.txt", mount.path)
    sh("cp files/docs/a.txt files/docs/deep/b.txt && mv files/docs/deep/b.txt files/docs/c.txt", mount.path)
    assert sorted(os.listdir(mount.path / "files" / "docs")) == ["a.txt", "c.txt", "deep"]
    assert (mount.path / "files" / "docs" / "c.txt").read_bytes() == b"hello\n"
    refused = sh("rmdir files/docs", mount.path, check=False)
    assert refused.returncode != 0 and "not empty" in refused.stderr
    sh("rm files/docs/a.txt files/docs/c.txt && rmdir files/docs/deep files/docs", mount.path)
    assert not (mount.path / "files" / "docs").exists()


def test_rename_over_an_existing_file_replaces_it(mount: Mount) -> None:
    sh("echo old > files/over.txt && echo new > files/over.tmp && mv files/over.tmp files/over.txt", mount.path)
    assert (mount.path / "files" / "over.txt").read_text() == "new\n"
    assert not (mount.path / "files" / "over.tmp").exists()
    sh("echo 'old fact' > facts/over.md && echo 'new fact' > facts/over-next.md", mount.path)
    sh("mv facts/over-next.md facts/over.md", mount.path)
    assert body((mount.path / "facts" / "over.md").read_text()) == "new fact\n"
    assert not (mount.path / "facts" / "over-next.md").exists()


def test_cp_a_file_into_the_notes(mount: Mount) -> None:
    sh("printf 'copied canary-cp\\n' > files/src.txt && cp files/src.txt facts/copied.md", mount.path)
    assert body((mount.path / "facts" / "copied.md").read_text()) == "copied canary-cp\n"


def test_grep_r_and_find_name(mount: Mount) -> None:
    sh("mkdir -p files/g && echo 'needle-grep here' > files/g/one.txt && echo 'needle-grep' > facts/g.md", mount.path)
    found = sh("grep -rl needle-grep files facts", mount.path).stdout.split()
    assert sorted(found) == ["facts/g.md", "files/g/one.txt"]
    assert sh("find . -name 'one.txt' -type f", mount.path).stdout.split() == ["./files/g/one.txt"]
    # the file's kept versions are a folder of the same name under /history/files
    assert sh("find . -name 'one.txt' -type d", mount.path).stdout.split() == ["./history/files/g/one.txt"]


def test_a_note_written_in_chunks_is_one_write(mount: Mount, store: tuple[Path, Path]) -> None:
    path = mount.path / "facts" / "chunks.md"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        for part in (b"one ", b"two ", b"three\n"):
            os.write(fd, part)
            os.fsync(fd) if part == b"three\n" else None
    finally:
        os.close(fd)
    writes = [r for r in provider(store).audit_log(limit=1000) if r["path"] == "/facts/chunks.md"]
    assert [r["verb"] for r in writes] == ["write"], writes
    assert body(path.read_text()) == "one two three\n"


def test_nothing_is_stored_before_the_file_is_flushed(mount: Mount, store: tuple[Path, Path]) -> None:
    fd = os.open(mount.path / "facts" / "half.md", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, b"half of a ")
        local = provider(store)
        from afi.errors import NotFound

        with pytest.raises(NotFound):
            local.stat(local.authenticate(None), "/facts/half.md")
        os.write(fd, b"note\n")
    finally:
        os.close(fd)
    assert body((mount.path / "facts" / "half.md").read_text()) == "half of a note\n"


def test_read_only_areas_refuse_writes_with_eacces(mount: Mount) -> None:
    for target in ("history/x.md", ".afi/manifest.json", "episodes/x.md"):
        with pytest.raises(PermissionError):
            (mount.path / target).write_text("x\n")
    assert not (mount.path / "history" / "x.md").exists()
    with pytest.raises(OSError) as caught:
        os.mkdir(mount.path / "facts" / "sub")
    assert caught.value.errno == errno.EPERM  # /facts is flat: no folders there


def test_missing_paths_are_enoent(mount: Mount) -> None:
    done = sh("cat facts/never.md", mount.path, check=False)
    assert done.returncode == 1 and "No such file" in done.stderr
    with pytest.raises(FileNotFoundError):
        os.unlink(mount.path / "files" / "never.txt")


def test_rm_forgets_a_note(mount: Mount) -> None:
    sh("echo 'short lived' > facts/gone.md && rm facts/gone.md", mount.path)
    assert "gone.md" not in os.listdir(mount.path / "facts")


def _search(mount: Mount, request: dict[str, Any]) -> list[dict[str, Any]]:
    fd = os.open(mount.path / ".afi" / "search", os.O_RDWR)
    try:
        os.write(fd, json.dumps(request).encode())
        answer = os.pread(fd, 1 << 20, 0).decode()
    finally:
        os.close(fd)
    assert answer.endswith("\n\n") or answer == "\n"
    return [json.loads(line) for line in answer.split("\n") if line]


def test_the_search_control_file(mount: Mount) -> None:
    sh("echo 'the marker zebra-42 lives here' > facts/zebra.md", mount.path)
    matches = _search(mount, {"query": "zebra-42", "path": "/facts"})
    assert [(m["path"], m["line"]) for m in matches] == [("/facts/zebra.md", 12)] or matches[0]["path"] == (
        "/facts/zebra.md"
    )
    assert all("zebra-42" in m["text"] for m in matches)
    semantic = _search(mount, {"query": {"semantic": "where does the zebra live"}, "path": "/facts"})
    assert semantic and all(0.0 <= m["score"] <= 1.0 for m in semantic)


def test_a_read_before_any_write_is_a_usage_hint(mount: Mount) -> None:
    hint = (mount.path / ".afi" / "search").read_text()
    assert "query" in hint and "empty line" in hint


def test_a_bad_search_fails_the_write_and_reads_back_the_error(mount: Mount) -> None:
    fd = os.open(mount.path / ".afi" / "search", os.O_RDWR)
    try:
        with pytest.raises(OSError) as caught:
            os.write(fd, b'{"query": {"regex": "(unclosed"}}')
        assert caught.value.errno == errno.EINVAL
        error = json.loads(os.pread(fd, 65536, 0).decode().split("\n")[0])["error"]
    finally:
        os.close(fd)
    assert error["code"] == "invalid_path" and "regex" in error["message"]


def test_two_searches_at_once_keep_their_own_results(mount: Mount) -> None:
    sh("echo 'apple-only line' > files/apple.txt && echo 'pear-only line' > files/pear.txt", mount.path)
    one = os.open(mount.path / ".afi" / "search", os.O_RDWR)
    two = os.open(mount.path / ".afi" / "search", os.O_RDWR)
    try:
        os.write(one, b'{"query": "apple-only", "path": "/files"}')
        os.write(two, b'{"query": "pear-only", "path": "/files"}')
        first, second = os.pread(one, 65536, 0).decode(), os.pread(two, 65536, 0).decode()
    finally:
        os.close(one)
        os.close(two)
    assert "/files/apple.txt" in first and "pear" not in first
    assert "/files/pear.txt" in second and "apple" not in second


def test_a_shell_can_search_on_one_descriptor(mount: Mount) -> None:
    sh("echo 'kiwi-shell line' > files/kiwi.txt", mount.path)
    out = sh("exec 3<>.afi/search; printf '%s' '{\"query\":\"kiwi-shell\"}' >&3; cat <&3", mount.path).stdout
    assert json.loads(out.split("\n")[0])["path"] == "/files/kiwi.txt" and out.endswith("\n\n")


def test_xattrs_carry_the_entry(mount: Mount) -> None:
    sh("echo 'x' > files/x.md", mount.path)
    assert os.getxattr(mount.path / "files" / "x.md", "user.afi.content_type") == b"text/markdown"
    entry = json.loads(os.getxattr(mount.path / "files" / "x.md", "user.afi.entry"))
    assert entry["path"] == "/files/x.md" and entry["size"] == 2


def test_truncate_shortens_and_extends_a_workspace_file(mount: Mount, store: tuple[Path, Path]) -> None:
    sh("mkdir -p files/trunc && printf 'abcdefgh' > files/trunc/t.bin", mount.path)
    sh("truncate -s 3 files/trunc/t.bin", mount.path)
    assert provider(store).read(_owner(), "/files/trunc/t.bin").data == b"abc"
    sh("truncate -s 5 files/trunc/t.bin", mount.path)
    assert provider(store).read(_owner(), "/files/trunc/t.bin").data == b"abc\x00\x00"


def _owner() -> Any:
    from afi.provider import Caller

    return Caller(principal="local", space="default")
