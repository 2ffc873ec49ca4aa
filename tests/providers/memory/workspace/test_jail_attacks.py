"""The workspace jail against a hostile host: symlinked space folders, hard links to outside files,
writes at huge offsets, limits, and the temporary files a crash leaves behind (with the store on each
engine where a test keeps one of its own)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

from afi.errors import AfiError, Forbidden, InvalidPath, NotFound, TooLarge
from afi.model import SearchRequest
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.workspace.quota import WorkspaceLimits, parse_size
from afi.providers.memory.workspace.workspace import TEMP_PREFIX
from tests.support.servers import start_afi_serve

OWNER = Caller(principal="local", space="default")
EVIL = Caller(principal="local", space="evil")
SECRET = b"outside secret: the root password is hunter2\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "secret.txt").write_bytes(SECRET)
    return folder


def _refused(call: object, *args: object, **kw: object) -> AfiError:
    with pytest.raises(AfiError) as caught:
        call(*args, **kw)  # type: ignore[operator]
    return caught.value


@pytest.mark.parametrize("when", ["before first use", "after first use"])
def test_a_space_folder_that_is_a_symlink_is_refused(provider: MemoryProvider, outside: Path, when: str) -> None:
    root = provider.root
    if when == "after first use":
        provider.write(EVIL, "/files/mine.txt", b"inside")
        shutil.rmtree(root / "evil")
    os.symlink(outside, root / "evil")
    verbs = [
        (provider.read, (EVIL, "/files/secret.txt")),
        (provider.stat, (EVIL, "/files/secret.txt")),
        (provider.list, (EVIL, "/files")),
        (provider.write, (EVIL, "/files/secret.txt", b"overwritten")),
        (provider.write, (EVIL, "/files/new.txt", b"planted")),
        (provider.write, (EVIL, "/files/secret.txt", b"!"), {"append": True}),
        (provider.mkdir, (EVIL, "/files/sub")),
        (provider.delete, (EVIL, "/files/secret.txt")),
        (provider.move, (EVIL, "/files/secret.txt", "/files/moved.txt")),
    ]
    for verb, args, *kw in verbs:
        err = _refused(verb, *args, **(kw[0] if kw else {}))
        assert err.code in ("invalid_path", "not_found"), (verb.__name__, err)
        if err.code == "invalid_path":
            assert "space folder" in err.message and "symlink" in err.message
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert (outside / "secret.txt").read_bytes() == SECRET
    assert not _search_hits(provider, EVIL, "hunter2")
    provider.write(OWNER, "/files/ok.txt", b"other spaces carry on")
    assert provider.read(OWNER, "/files/ok.txt").data == b"other spaces carry on"


def test_a_space_folder_that_is_a_file_is_refused(provider: MemoryProvider) -> None:
    (provider.root / "evil").write_bytes(b"not a folder")
    err = _refused(provider.write, EVIL, "/files/x.txt", b"x")
    assert err.code == "invalid_path" and "not a real folder" in err.message


def _search_hits(provider: MemoryProvider, caller: Caller, text: str) -> list[str]:
    try:
        page = provider.search(caller, SearchRequest(query=text, path="/"))
    except AfiError:
        return []
    return [m.path for m in page.matches]


def test_a_hard_link_to_an_outside_file_is_neither_read_nor_changed(provider: MemoryProvider, outside: Path) -> None:
    provider.write(OWNER, "/files/plain.txt", b"mine")
    workspace = provider.root / "default"
    os.link(outside / "secret.txt", workspace / "linked.txt")
    err = _refused(provider.read, OWNER, "/files/linked.txt")
    assert isinstance(err, Forbidden) and "hard links" in err.message
    for kw in ({"append": True}, {"offset": 0}, {"offset": 3}):
        err = _refused(provider.write, OWNER, "/files/linked.txt", b"XX", **kw)
        assert isinstance(err, Forbidden), (kw, err)
    assert (outside / "secret.txt").read_bytes() == SECRET
    assert not _search_hits(provider, OWNER, "hunter2")  # never indexed, even after a refresh
    # Written whole, the name gets a file of its own; the outside file is untouched.
    provider.write(OWNER, "/files/linked.txt", b"replaced")
    assert provider.read(OWNER, "/files/linked.txt").data == b"replaced"
    assert (outside / "secret.txt").read_bytes() == SECRET
    assert os.stat(workspace / "linked.txt").st_nlink == 1


def test_a_write_at_a_huge_offset_is_sparse_or_refused(provider: MemoryProvider, tmp_path: Path) -> None:
    entry = provider.write(OWNER, "/files/sparse.bin", b"x", offset=1_000_000_000)
    assert entry.size == 1_000_000_001
    on_disk = os.stat(provider.root / "default" / "sparse.bin")
    assert on_disk.st_blocks * 512 < 1 << 20, f"{on_disk.st_blocks * 512} bytes allocated for a 1-byte write"
    assert provider.read(OWNER, "/files/sparse.bin", offset=1_000_000_000).data == b"x"
    entry = provider.write(OWNER, "/files/sparse.bin", b"y", offset=1_000_000_010)  # in place, past the end
    assert entry.size == 1_000_000_011
    for offset in (10**11, 2**62):
        err = _refused(provider.write, OWNER, "/files/far.bin", b"x", offset=offset)
        assert isinstance(err, TooLarge) and "at most 1 GiB" in err.message and "AFI_MAX_FILE_SIZE" in err.message
    assert not (provider.root / "default" / "far.bin").exists()


def test_limits_name_themselves_and_leave_nothing_behind(tmp_path: Path, store_url: str) -> None:
    limits = WorkspaceLimits(max_file_bytes=1000, space_quota_bytes=2500)
    provider = MemoryProvider(store_url, tmp_path / "files", workspace_limits=limits)
    err = _refused(provider.write, OWNER, "/files/new/big.bin", b"x" * 1001)
    assert isinstance(err, TooLarge) and "1000 bytes" in err.message
    assert not (provider.root / "default" / "new").exists()
    provider.write(OWNER, "/files/a.bin", b"a" * 1000)
    provider.write(OWNER, "/files/b.bin", b"b" * 1000)
    err = _refused(provider.write, OWNER, "/files/c.bin", b"c" * 600)
    assert isinstance(err, TooLarge) and "AFI_SPACE_QUOTA" in err.message and "(2,000 bytes) are in use" in err.message
    err = _refused(provider.write, OWNER, "/files/a.bin", b"!" * 501, append=True)
    assert isinstance(err, TooLarge)
    provider.write(OWNER, "/files/a.bin", b"a" * 500)  # shrinking frees room
    provider.write(OWNER, "/files/c.bin", b"c" * 500)
    assert provider.read(OWNER, "/files/a.bin").data == b"a" * 500
    other = Caller(principal="local", space="other")
    provider.write(other, "/files/c.bin", b"c" * 1000)  # the quota is per space


def test_parse_size_reads_what_people_write() -> None:
    assert parse_size("4096", 0) == 4096
    assert parse_size("512M", 0) == 512 << 20
    assert parse_size("10GiB", 0) == 10 << 30
    assert parse_size("1.5k", 0) == 1536
    assert parse_size(None, 7) == 7
    for bad in ("lots", "-1G", "nan"):
        with pytest.raises(ValueError, match=r"not a size|negative"):
            parse_size(bad, 0)


def test_temporary_files_are_hidden_and_swept_at_start(tmp_path: Path, store_url: str) -> None:
    db, root = store_url, tmp_path / "files"
    first = MemoryProvider(db, root)
    first.write(OWNER, "/files/docs/kept.txt", b"kept")
    orphans = [root / "default" / f"{TEMP_PREFIX}crashed", root / "default" / "docs" / f"{TEMP_PREFIX}0123"]
    for orphan in orphans:
        orphan.write_bytes(b"half a write, canary")
    assert [e.path for e in first.list(OWNER, "/files/docs").entries] == ["/files/docs/kept.txt"]
    with pytest.raises(NotFound):
        first.read(OWNER, f"/files/{TEMP_PREFIX}crashed")
    with pytest.raises(NotFound):
        first.stat(OWNER, f"/files/docs/{TEMP_PREFIX}0123")
    with pytest.raises(InvalidPath, match="temporary"):
        first.write(OWNER, f"/files/{TEMP_PREFIX}mine", b"x")
    assert not _search_hits(first, OWNER, "canary")
    second = MemoryProvider(db, root)  # a restart
    second.stat(OWNER, "/files")
    assert not any(orphan.exists() for orphan in orphans)
    assert second.read(OWNER, "/files/docs/kept.txt").data == b"kept"


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_large_offset_over_http_allocates_nothing(tmp_path: Path) -> None:
    with start_afi_serve(tmp_path / "afi.db", tmp_path / "files") as server:
        assert server.process is not None
        before = _rss_kib(server.process.pid)
        with httpx.Client(base_url=server.url, timeout=60) as client:
            answer = client.put("/afi/write", params={"path": "/files/o.bin", "offset": 1_000_000_000}, content=b"1")
            assert answer.status_code == 200, answer.text
            assert answer.json()["size"] == 1_000_000_001
            answer = client.put("/afi/write", params={"path": "/files/p.bin", "offset": 10**11}, content=b"1")
            assert answer.status_code == 413 and answer.json()["error"]["code"] == "too_large"
            assert "AFI_MAX_FILE_SIZE" in answer.json()["error"]["message"]
            tail = client.get("/afi/read", params={"path": "/files/o.bin", "offset": 999_999_990})
            assert tail.content == b"\x00" * 10 + b"1"
        grew = _rss_kib(server.process.pid) - before
        allocated = os.stat(tmp_path / "files" / "default" / "o.bin").st_blocks * 512
    assert grew < 64 << 10, f"the server grew by {grew} KiB"
    assert allocated < 1 << 20


def test_a_name_that_is_not_utf8_made_on_disk_is_not_shown(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/files/ok.txt", b"visible canary")
    folder = os.fsencode(provider.root / "default")
    with open(os.path.join(folder, b"bad\xff.txt"), "wb") as handle:
        handle.write(b"hidden canary")
    os.mkdir(os.path.join(folder, b"dir\xfe"))
    with open(os.path.join(folder, b"dir\xfe", b"inner.txt"), "wb") as handle:
        handle.write(b"inner canary")
    assert [e.path for e in provider.list(OWNER, "/files").entries] == ["/files/ok.txt"]
    assert [p for p in _search_hits(provider, OWNER, "canary") if p.startswith("/files")] == ["/files/ok.txt"]
