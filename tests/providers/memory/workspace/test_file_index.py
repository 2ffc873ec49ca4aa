"""The workspace's file index on both engines: writes indexed at once, edits on disk picked up by a
refresh, candidates that never miss a file holding a literal in any case, texts by rowid, the change
counter grep's cache checks, and the bytes the quota counts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from afi.providers.memory.workspace.workspace import Workspace
from afi.storage.database import Database, open_database


@pytest.fixture
def database(store_url: str) -> Database:
    return open_database(store_url)


@pytest.fixture
def workspace(database: Database, tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "files", "default", database)


def _write(workspace: Workspace, rel: str, data: bytes) -> None:
    workspace.write(rel, f"/files/{rel}", data, offset=None, append=False, create_only=False)


def _paths(workspace: Workspace, literal: str | None) -> list[str]:
    return sorted(path for _, path in workspace.candidates(literal))


def test_written_files_are_candidates_by_their_text_in_any_case(workspace: Workspace) -> None:
    _write(workspace, "notes/fox.txt", b"The Quick brown fox\n")
    _write(workspace, "dog.txt", b"jumps over the lazy dog\n")
    _write(workspace, "blob.bin", b"\x00quick but binary")  # not text: its size is kept, not its text
    _write(workspace, "cafe.txt", "CAFÉ CRÈME, 4 \u212aelvin above".encode())  # U+212A: the Kelvin sign
    assert _paths(workspace, "quick") == ["notes/fox.txt"]
    assert _paths(workspace, "QUICK BROWN") == ["notes/fox.txt"]
    assert _paths(workspace, "lazy dog") == ["dog.txt"]
    assert _paths(workspace, "café crème") == ["cafe.txt"]  # é and É: a case-insensitive regex equates them
    assert _paths(workspace, "kelvin") == ["cafe.txt"]
    assert _paths(workspace, "nowhere") == []
    every = ["blob.bin", "cafe.txt", "dog.txt", "notes/fox.txt"]
    assert _paths(workspace, None) == every
    assert _paths(workspace, "ox") == every  # under three characters: every file is a candidate


def test_like_wildcards_in_a_literal_stand_for_themselves(workspace: Workspace) -> None:
    _write(workspace, "percent.txt", b"100%_done \\o/")
    _write(workspace, "plain.txt", b"100xxdone xoo/ 100x_done 100%xdone")
    assert _paths(workspace, "0%_d") == ["percent.txt"]
    assert _paths(workspace, " \\o/") == ["percent.txt"]


def test_texts_by_rowid_are_the_space_s_own(workspace: Workspace, database: Database, tmp_path: Path) -> None:
    other = Workspace(tmp_path / "files", "other", database)
    _write(workspace, "a.txt", b"alpha text")
    _write(other, "a.txt", b"other alpha text")
    mine = dict((path, rowid) for rowid, path in workspace.candidates("alpha"))
    theirs = [rowid for rowid, _ in other.candidates("alpha")]
    assert list(mine) == ["a.txt"] and len(theirs) == 1
    assert workspace.texts_by_rowid([mine["a.txt"], *theirs]) == {mine["a.txt"]: "alpha text"}
    assert workspace.texts_by_rowid([]) == {}


def test_every_change_grows_the_change_token(workspace: Workspace) -> None:
    tokens = [workspace.change_token()]
    _write(workspace, "a.txt", b"one")
    tokens.append(workspace.change_token())
    _write(workspace, "a.txt", b"two, longer")
    tokens.append(workspace.change_token())
    workspace.candidates("two")
    assert workspace.change_token() == tokens[-1]  # reads change nothing
    workspace.delete("a.txt", "/files/a.txt", recursive=False)
    tokens.append(workspace.change_token())
    assert tokens[0] == 0 and tokens == sorted(set(tokens)), tokens


def test_a_refresh_picks_up_edits_made_on_disk(workspace: Workspace, tmp_path: Path) -> None:
    folder = tmp_path / "files" / "default"
    _write(workspace, "kept.txt", b"kept as it is")
    _write(workspace, "edited.txt", b"before the edit")
    _write(workspace, "gone.txt", b"removed behind our back")
    before = workspace.change_token()
    (folder / "edited.txt").write_bytes(b"after the edit, on disk")
    os.utime(folder / "edited.txt", ns=(1, 1))  # a new mtime whatever the clock's resolution
    (folder / "new").mkdir()
    (folder / "new" / "made.txt").write_bytes(b"made on disk")
    (folder / "gone.txt").unlink()
    workspace.refresh(force=True)
    assert _paths(workspace, None) == ["edited.txt", "kept.txt", "new/made.txt"]
    rowids = dict((path, rowid) for rowid, path in workspace.candidates("on disk"))
    assert sorted(rowids) == ["edited.txt", "new/made.txt"]
    assert workspace.texts_by_rowid(list(rowids.values())) == {
        rowids["edited.txt"]: "after the edit, on disk",
        rowids["new/made.txt"]: "made on disk",
    }
    assert workspace.change_token() > before
    settled = workspace.change_token()
    workspace.refresh(force=True)
    assert workspace.change_token() == settled  # nothing changed on disk: nothing written


def test_deleting_a_folder_forgets_its_files_only(workspace: Workspace) -> None:
    for rel in ("docs/a.txt", "docs/sub/b.txt", "docs.txt", "docsx/c.txt"):
        _write(workspace, rel, b"some text")
    removed = workspace.delete("docs", "/files/docs", recursive=True)
    assert sorted(removed) == ["docs/a.txt", "docs/sub/b.txt"]
    assert _paths(workspace, "some text") == ["docs.txt", "docsx/c.txt"]


def test_used_bytes_count_every_file_but_the_one_named(workspace: Workspace) -> None:
    _write(workspace, "a.txt", b"12345")
    _write(workspace, "b.bin", b"\x00" * 7)
    _write(workspace, "c/d.txt", b"123")
    assert workspace.index.used_bytes(besides="") == 15
    assert workspace.index.used_bytes(besides="b.bin") == 8
