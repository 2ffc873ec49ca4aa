"""Open conflicts, in-process over two real stores: a name written on both sides and settled by a sync
is listed alike on both (``open_conflicts``) until a write of that name, a forget of it or of the
versions it won over closes it, on both sides once they sync again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from afi.auth.keys import LOCAL_OWNER
from afi.errors import Forbidden
from afi.provider import Caller, ConflictsProvider
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.sync import LocalEndpoint, sync

Pair = tuple[MemoryProvider, MemoryProvider, LocalEndpoint, LocalEndpoint]


def _pair(tmp_path: Path, second: str | None = None) -> Pair:
    for side in ("files-a", "files-b"):
        (tmp_path / side / "default").mkdir(parents=True)
    a = MemoryProvider(tmp_path / "a.db", tmp_path / "files-a")
    b = MemoryProvider(second or tmp_path / "b.db", tmp_path / "files-b")
    return a, b, LocalEndpoint(a, LOCAL_OWNER, "laptop"), LocalEndpoint(b, LOCAL_OWNER, "server")


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    return _pair(tmp_path)


def _conflicted(pair: Pair, name: str = "units") -> tuple[str, str]:
    """Write ``name`` on both sides after a first sync, sync again; return (winner id, loser id)."""
    a, b, laptop, server = pair
    a.remember(LOCAL_OWNER, kind="fact", name=name, content="we use metric units")
    sync(laptop, server)
    a.remember(LOCAL_OWNER, kind="fact", name=name, content="we use imperial units now")
    b.remember(LOCAL_OWNER, kind="fact", name=name, content="we use SI units everywhere")
    report = sync(laptop, server)
    [conflict] = report.pulled.conflicts + report.pushed.conflicts
    return conflict.kept, conflict.retired


def _links(provider: MemoryProvider, path: str) -> str:
    text = provider.read(LOCAL_OWNER, path).data.decode()
    return text.split("\n---\n", 1)[0]


def test_a_settled_name_is_listed_alike_on_both_sides(pair: Pair) -> None:
    a, b, _, _ = pair
    assert isinstance(a, ConflictsProvider)
    assert a.open_conflicts(LOCAL_OWNER) == []
    winner, loser = _conflicted(pair)
    listed = a.open_conflicts(LOCAL_OWNER)
    assert listed == b.open_conflicts(LOCAL_OWNER)
    [conflict] = listed
    retired = a.fabric("default").get(loser)
    assert retired is not None and retired.valid_to is not None
    assert conflict == {
        "kind": "fact", "name": "units", "path": "/facts/units.md", "id": winner, "history": f"/history/{winner}.md",
        "settled_at": retired.valid_to,
        "losers": [{"id": loser, "path": f"/history/{loser}.md", "retired_at": retired.valid_to}],
    }  # fmt: skip
    for path in (conflict["path"], conflict["history"], conflict["losers"][0]["path"]):
        assert a.read(LOCAL_OWNER, path).data  # every path it names reads


def _write_as_read(provider: MemoryProvider) -> None:
    """An editor's save of the note unchanged: the text as read, front matter (and its links) included."""
    provider.write(LOCAL_OWNER, "/facts/units.md", provider.read(LOCAL_OWNER, "/facts/units.md").data)


def _edit_as_read(provider: MemoryProvider) -> None:
    """An editor's save with a changed line, the front matter as read."""
    text = provider.read(LOCAL_OWNER, "/facts/units.md").data.decode()
    provider.write(LOCAL_OWNER, "/facts/units.md", text.replace("SI units", "SI units, and metres").encode())


def _remember_new_text(provider: MemoryProvider) -> None:
    provider.remember(LOCAL_OWNER, kind="fact", name="units", content="we settled on SI units")


def _remember_same_text(provider: MemoryProvider) -> None:
    current = provider.fabric("default").find("fact", "units")
    assert current is not None
    provider.remember(LOCAL_OWNER, kind="fact", name="units", content=current.content)


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(_write_as_read, id="saved-unchanged-through-the-tree"),
        pytest.param(_edit_as_read, id="edited-through-the-tree"),
        pytest.param(_remember_new_text, id="remembered-with-new-text"),
        pytest.param(_remember_same_text, id="remembered-with-the-same-text"),
    ],
)
def test_a_new_version_of_the_name_closes_the_conflict_on_both_sides(
    pair: Pair, answer: Callable[[MemoryProvider], None]
) -> None:
    a, b, laptop, server = pair
    winner, loser = _conflicted(pair)
    answer(b)
    assert b.open_conflicts(LOCAL_OWNER) == [] and len(a.open_conflicts(LOCAL_OWNER)) == 1
    current = b.fabric("default").find("fact", "units")
    assert current is not None and current.id != winner and current.supersedes == winner
    assert "won_over" not in _links(b, "/facts/units.md")  # the links stay with the version that won
    assert "won_over" in _links(b, f"/history/{winner}.md")
    report = sync(laptop, server)
    assert report.pulled.conflicts == report.pushed.conflicts == []
    assert a.open_conflicts(LOCAL_OWNER) == [] == b.open_conflicts(LOCAL_OWNER)
    assert a.read(LOCAL_OWNER, "/facts/units.md").data == b.read(LOCAL_OWNER, "/facts/units.md").data
    assert a.read(LOCAL_OWNER, f"/history/{loser}.md").data  # the version it lost to is still kept


def test_the_same_text_written_again_folds_as_before_when_no_conflict_is_open(pair: Pair) -> None:
    a, _, _, _ = pair
    first = a.remember(LOCAL_OWNER, kind="fact", name="units", content="we use metric units")
    again = a.remember(LOCAL_OWNER, kind="fact", name="units", content="we use metric units")
    assert again.id == first.id  # one version: only a version that won a conflict is answered by a new one


def test_forgetting_the_name_closes_it_on_both_sides(pair: Pair) -> None:
    a, b, laptop, server = pair
    _conflicted(pair)
    a.delete(LOCAL_OWNER, "/facts/units.md")
    assert a.open_conflicts(LOCAL_OWNER) == []
    sync(laptop, server)
    assert b.open_conflicts(LOCAL_OWNER) == []


def test_forgetting_the_versions_it_won_over_closes_it(pair: Pair) -> None:
    a, b, laptop, server = pair
    winner, loser = _conflicted(pair)
    a.forget(LOCAL_OWNER, id=loser)
    assert a.open_conflicts(LOCAL_OWNER) == []  # nothing left to compare the current version with
    assert b.fabric("default").find("fact", "units") is not None
    sync(laptop, server)
    assert b.open_conflicts(LOCAL_OWNER) == []
    current = a.fabric("default").find("fact", "units")
    assert current is not None and current.id == winner


def test_a_file_written_on_both_sides_is_listed_and_closed_by_writing_it(pair: Pair) -> None:
    a, b, laptop, server = pair
    a.write(LOCAL_OWNER, "/files/notes/plan.txt", b"the laptop's plan")
    b.write(LOCAL_OWNER, "/files/notes/plan.txt", b"the server's plan, written later")
    sync(laptop, server)
    [conflict] = a.open_conflicts(LOCAL_OWNER)
    assert (conflict["kind"], conflict["name"], conflict["path"]) == ("file", "notes/plan.txt", "/files/notes/plan.txt")
    assert b.open_conflicts(LOCAL_OWNER) == [conflict]
    a.write(LOCAL_OWNER, "/files/notes/plan.txt", b"the plan we agreed on")
    assert a.open_conflicts(LOCAL_OWNER) == []
    sync(laptop, server)
    assert b.open_conflicts(LOCAL_OWNER) == []
    assert b.read(LOCAL_OWNER, "/files/notes/plan.txt").data == b"the plan we agreed on"


def test_listing_needs_afi_read_and_shows_the_caller_s_space_only(pair: Pair) -> None:
    a, _, _, _ = pair
    _conflicted(pair)
    nobody = Caller(principal="k1", space="default", scopes=frozenset())
    with pytest.raises(Forbidden, match="afi:read"):
        a.open_conflicts(nobody)
    reader = Caller(principal="k2", space="default", scopes=frozenset({"afi:read"}))
    assert len(a.open_conflicts(reader)) == 1
    elsewhere = Caller(principal="k3", space="work", scopes=frozenset({"afi:read"}))
    assert a.open_conflicts(elsewhere) == []


def test_a_sqlite_store_and_a_postgresql_store_list_the_same(tmp_path: Path, pg_store_url: str) -> None:
    pair = _pair(tmp_path, second=pg_store_url)
    a, b, _, _ = pair
    winner, _ = _conflicted(pair)
    listed: list[dict[str, Any]] = a.open_conflicts(LOCAL_OWNER)
    assert listed == b.open_conflicts(LOCAL_OWNER) and [c["id"] for c in listed] == [winner]
    _remember_new_text(b)
    assert b.open_conflicts(LOCAL_OWNER) == []
