"""Workspace files in a sync: every kept version reaches both sides (each blob once), each side's
``/files`` shows the newest version of each path, a file written on both sides keeps both versions,
bytes edited on disk behind the provider's back are kept before a sync replaces them, and file
batches no store sends are refused whole."""

from __future__ import annotations

import base64
import hashlib
import random
from pathlib import Path
from typing import Any

import pytest

from afi.auth.keys import LOCAL_OWNER
from afi.errors import AfiError, InvalidPath, TooLarge
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.sync import FileBatch, LocalEndpoint, sync

Pair = tuple[MemoryProvider, MemoryProvider, LocalEndpoint, LocalEndpoint]


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    a = MemoryProvider(tmp_path / "a.db", tmp_path / "files-a")
    b = MemoryProvider(tmp_path / "b.db", tmp_path / "files-b")
    return a, b, LocalEndpoint(a, LOCAL_OWNER, "laptop"), LocalEndpoint(b, LOCAL_OWNER, "server")


def _disk(root: Path) -> dict[str, bytes]:
    space = root / "default"
    return {str(p.relative_to(space)): p.read_bytes() for p in sorted(space.rglob("*")) if p.is_file()}


def _versions(provider: MemoryProvider) -> set[tuple[Any, ...]]:
    with provider.fabric("default").memory.store.read() as conn:
        rows = conn.execute("SELECT path, sha256, size, at, op FROM file_versions WHERE space = 'default'").fetchall()
    return {tuple(row) for row in rows}


def _write(provider: MemoryProvider, path: str, data: bytes) -> None:
    provider.write(LOCAL_OWNER, f"/files/{path}", data)


def test_a_file_written_on_one_side_reaches_the_other_with_its_versions(tmp_path: Path, pair: Pair) -> None:
    a, b, laptop, server = pair
    _write(a, "notes/todo.txt", b"buy milk\n")
    _write(a, "notes/todo.txt", b"buy milk\nand bread\n")
    _write(b, "plan.md", b"# plan\n")
    report = sync(laptop, server)
    assert (report.pushed.file_versions, report.pulled.file_versions) == (2, 1)
    assert _disk(tmp_path / "files-a") == _disk(tmp_path / "files-b") == {
        "notes/todo.txt": b"buy milk\nand bread\n", "plan.md": b"# plan\n"}  # fmt: skip
    assert _versions(a) == _versions(b) and len(_versions(a)) == 3
    assert b.read(LOCAL_OWNER, "/files/notes/todo.txt").data == b"buy milk\nand bread\n"
    again = sync(laptop, server)
    assert again.pushed.file_versions == again.pulled.file_versions == 0


def test_a_file_written_on_both_sides_keeps_both_versions_and_shows_the_later(tmp_path: Path, pair: Pair) -> None:
    a, b, laptop, server = pair
    _write(a, "plan.md", b"the laptop's plan\n")
    _write(b, "plan.md", b"the server's plan\n")
    sync(laptop, server)
    assert _disk(tmp_path / "files-a") == _disk(tmp_path / "files-b")
    later = max(_versions(a), key=lambda v: (v[3], v[1] or "", v[4]))
    assert hashlib.sha256(_disk(tmp_path / "files-a")["plan.md"]).hexdigest() == later[1]
    kept = a.list(LOCAL_OWNER, "/history/files/plan.md").entries
    assert len(kept) == 2  # both writes, readable in the history of each side
    assert _versions(a) == _versions(b)


def _folders(root: Path) -> list[str]:
    space = root / "default"
    return sorted(str(p.relative_to(space)) for p in space.rglob("*") if p.is_dir())


def test_empty_folders_travel_and_removed_ones_go_on_both_sides(tmp_path: Path, pair: Pair) -> None:
    a, b, laptop, server = pair
    a.mkdir(LOCAL_OWNER, "/files/inbox")
    a.mkdir(LOCAL_OWNER, "/files/archive/2026", parents=True)
    _write(b, "drafts/one.md", b"one\n")
    report = sync(laptop, server)
    assert report.pushed.folders == 2
    assert _folders(tmp_path / "files-a") == _folders(tmp_path / "files-b") == [
        "archive", "archive/2026", "drafts", "inbox"]  # fmt: skip
    b.delete(LOCAL_OWNER, "/files/inbox")
    b.move(LOCAL_OWNER, "/files/archive", "/files/old")
    a.delete(LOCAL_OWNER, "/files/drafts", recursive=True)
    sync(laptop, server)
    assert _folders(tmp_path / "files-a") == _folders(tmp_path / "files-b") == ["old", "old/2026"]
    assert sync(laptop, server).pushed.folders == 0  # nothing moves twice
    _write(a, "keep/file.txt", b"kept\n")
    sync(laptop, server)
    b.mkdir(LOCAL_OWNER, "/files/keep/empty")
    a.delete(LOCAL_OWNER, "/files/old", recursive=True)
    _write(b, "old/2026/late.txt", b"written there meanwhile\n")  # a folder with files in it stays
    sync(laptop, server)
    assert _folders(tmp_path / "files-a") == _folders(tmp_path / "files-b") == [
        "keep", "keep/empty", "old", "old/2026"]  # fmt: skip
    assert _disk(tmp_path / "files-a") == _disk(tmp_path / "files-b")


def test_a_delete_and_a_move_travel(tmp_path: Path, pair: Pair) -> None:
    a, _, laptop, server = pair
    _write(a, "old.txt", b"old\n")
    _write(a, "keep.txt", b"keep\n")
    sync(laptop, server)
    a.delete(LOCAL_OWNER, "/files/old.txt")
    a.move(LOCAL_OWNER, "/files/keep.txt", "/files/kept/keep.txt")
    sync(laptop, server)
    assert _disk(tmp_path / "files-b") == {"kept/keep.txt": b"keep\n"} == _disk(tmp_path / "files-a")


def test_bytes_edited_on_disk_behind_the_provider_are_kept_before_a_sync_replaces_them(
    tmp_path: Path, pair: Pair
) -> None:
    a, b, laptop, server = pair
    _write(a, "plan.md", b"v1\n")
    sync(laptop, server)
    (tmp_path / "files-b" / "default" / "plan.md").write_bytes(b"edited by hand on the server\n")
    _write(a, "plan.md", b"v2 from the laptop\n")
    sync(laptop, server)
    shas = {v[1] for v in _versions(b)}
    assert hashlib.sha256(b"edited by hand on the server\n").hexdigest() in shas  # kept, not lost
    assert _disk(tmp_path / "files-b")["plan.md"] in (b"v2 from the laptop\n", b"edited by hand on the server\n")
    sync(laptop, server)
    assert _disk(tmp_path / "files-a") == _disk(tmp_path / "files-b") and _versions(a) == _versions(b)


def _file_batch(server: LocalEndpoint, versions: list[Any], blobs: dict[str, str] | None = None) -> dict[str, Any]:
    return {"store": server.identity(), "space": "default", "since": 0, "upto": 1, "more": False,
            "versions": versions, "blobs": blobs or {}}  # fmt: skip


def test_file_batches_no_store_sends_are_refused_and_change_nothing(tmp_path: Path, pair: Pair) -> None:
    a, _, _, server = pair
    _write(a, "mine.txt", b"mine\n")
    data = b"from a peer\n"
    sha = hashlib.sha256(data).hexdigest()
    blob = {sha: base64.b64encode(data).decode()}
    good = {"path": "peer.txt", "sha256": sha, "size": len(data), "at": "2026-01-01T00:00:00.000Z", "op": "write"}
    before, disk = _versions(a), _disk(tmp_path / "files-a")
    bad: list[tuple[list[Any], dict[str, str], type[AfiError], str]] = [
        ([{**good, "path": "../outside.txt"}], blob, InvalidPath, "'..'"),
        ([{**good, "path": "/abs.txt"}], blob, InvalidPath, "workspace path"),
        ([{**good, "path": "a//b.txt"}], blob, InvalidPath, "workspace path"),
        ([{**good, "path": ".afi-tmp-x"}], blob, InvalidPath, "not a path a workspace file has"),
        ([{**good, "sha256": "x" * 64}], blob, InvalidPath, "64 lowercase hex"),
        ([{**good, "size": 3}], blob, InvalidPath, "its bytes are"),
        ([{**good, "at": "2999-01-01T00:00:00.000Z"}], blob, InvalidPath, "ahead of this store's clock"),
        ([{**good, "at": "yesterday"}], blob, InvalidPath, "time"),
        ([{**good, "op": "chmod"}], blob, InvalidPath, "op is one of"),
        ([{**good, "extra": 1}], blob, InvalidPath, "exactly"),
        (
            [good],
            {sha: base64.b64encode(b"other bytes").decode()},
            InvalidPath,
            "not base64 of bytes with that SHA-256",
        ),
        ([good], {sha: "%%%"}, InvalidPath, "not base64"),
        ([{**good, "size": 2**62, "sha256": "a" * 64}], {}, TooLarge, "cap on a workspace file"),
        ([good] * 501, blob, TooLarge, "at most 500"),
    ]
    for versions, blobs, error, message in bad:
        with pytest.raises(error, match=message):
            a.sync_apply_files(LOCAL_OWNER, _file_batch(server, [*versions, good], blobs), label="server")
        assert _versions(a) == before and _disk(tmp_path / "files-a") == disk and a.sync_peers() == []
    with pytest.raises(InvalidPath, match="files of space 'work'"):
        a.sync_apply_files(LOCAL_OWNER, {**_file_batch(server, [good], blob), "space": "work"}, label="server")
    a.sync_apply_files(LOCAL_OWNER, _file_batch(server, [good], blob), label="server")  # the good one is taken
    assert _disk(tmp_path / "files-a")["peer.txt"] == data
    assert FileBatch.from_json(_file_batch(server, [good], blob)).blobs == {sha: data}


def test_random_file_and_note_work_on_both_sides_ends_the_same(tmp_path: Path, pair: Pair) -> None:
    rng = random.Random(34)
    a, b, laptop, server = pair
    paths = ["a.txt", "b.txt", "dir/c.txt", "dir/d.md"]
    ops = syncs = 0
    for _ in range(200):
        side = rng.choice((a, b))
        path = rng.choice(paths)
        roll = rng.random()
        try:
            if roll < 0.5:
                _write(side, path, f"{path} {rng.randrange(10**6)}\n".encode())
            elif roll < 0.65:
                side.delete(LOCAL_OWNER, f"/files/{path}")
            elif roll < 0.8:
                side.move(LOCAL_OWNER, f"/files/{path}", f"/files/{rng.choice(paths)}", overwrite=True)
            else:
                side.remember(LOCAL_OWNER, kind="fact", name=f"n{rng.randrange(5)}", content=f"x {rng.randrange(99)}")
        except AfiError:  # a delete or move of a file that is not there, a move onto itself
            continue
        ops += 1
        if rng.random() < 0.1:
            sync(laptop, server, pull=rng.random() < 0.7, push=rng.random() < 0.7)
            syncs += 1
    sync(laptop, server)
    sync(laptop, server)
    assert _versions(a) == _versions(b)
    assert _disk(tmp_path / "files-a") == _disk(tmp_path / "files-b")
    print(f"{ops} operations, {syncs} syncs, {len(_versions(a))} file versions on each side, failures: 0")


def test_files_between_a_sqlite_store_and_a_postgresql_store(tmp_path: Path, pg_store_url: str) -> None:
    a = MemoryProvider(tmp_path / "a.db", tmp_path / "files-a")
    b = MemoryProvider(pg_store_url, tmp_path / "files-b")
    laptop, server = LocalEndpoint(a, LOCAL_OWNER, "laptop"), LocalEndpoint(b, LOCAL_OWNER, "server")
    _write(a, "plan.md", b"the laptop's plan\n")
    _write(b, "plan.md", b"the server's plan\n")
    _write(b, "img.bin", bytes(range(256)) * 100)
    sync(laptop, server)
    a.delete(LOCAL_OWNER, "/files/img.bin")
    sync(laptop, server)
    assert _versions(a) == _versions(b) and len(_versions(a)) == 4
    assert _disk(tmp_path / "files-a") == _disk(tmp_path / "files-b") and set(_disk(tmp_path / "files-a")) == {
        "plan.md"
    }
