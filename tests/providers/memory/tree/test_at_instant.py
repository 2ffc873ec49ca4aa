"""``/.afi/at/<instant>/``: the notes as they stood at an instant, read-only, on each engine.

A note written, then changed, then another written, then one forgotten: at each instant between,
stat, list, read and the three search modes show exactly what was believed then."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from afi.errors import Forbidden, InvalidPath, NotFound
from afi.model import SearchRequest, SemanticQuery
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider

OWNER = Caller(principal="local", space="default")


def instant() -> str:
    time.sleep(0.01)  # versions are stamped to the millisecond
    moment = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    time.sleep(0.01)
    return moment


@pytest.fixture
def history(tmp_path: Path, store_url: str) -> Iterator[tuple[MemoryProvider, dict[str, str]]]:
    provider = MemoryProvider(store_url, tmp_path / "files")
    marks = {"before": instant()}
    provider.write(OWNER, "/facts/deploy.md", b"We deploy with a zebra canary on Mondays")
    provider.write(OWNER, "/procedures/rollback.md", b"Roll back with the walrus switch")
    provider.write(OWNER, "/facts/scratch.md", b"A secret the user asked us to forget: lynx")
    marks["monday"] = instant()
    provider.write(OWNER, "/facts/deploy.md", b"We deploy blue-green with an okapi gate now")
    provider.write(OWNER, "/facts/oncall.md", b"The oncall rota lives in the heron sheet")
    marks["tuesday"] = instant()
    provider.delete(OWNER, "/facts/scratch.md")
    marks["wednesday"] = instant()
    yield provider, marks


def names(provider: MemoryProvider, path: str) -> list[str]:
    return [e.path.rsplit("/", 1)[1] for e in provider.list(OWNER, path).entries]


def test_each_instant_lists_and_reads_what_was_believed_then(history: tuple[MemoryProvider, dict[str, str]]) -> None:
    provider, t = history
    assert names(provider, f"/.afi/at/{t['before']}/facts") == []
    at_monday = ["episodes", "facts", "files", "history", "procedures", "sessions"]
    assert names(provider, f"/.afi/at/{t['monday']}") == at_monday
    assert names(provider, f"/.afi/at/{t['monday']}/facts") == ["deploy.md"]  # scratch.md: forgotten since
    assert b"zebra canary" in provider.read(OWNER, f"/.afi/at/{t['monday']}/facts/deploy.md").data
    assert names(provider, f"/.afi/at/{t['tuesday']}/facts") == ["deploy.md", "oncall.md"]
    assert b"okapi gate" in provider.read(OWNER, f"/.afi/at/{t['tuesday']}/facts/deploy.md").data
    assert names(provider, f"/.afi/at/{t['tuesday']}/procedures") == ["rollback.md"]
    assert names(provider, f"/.afi/at/{t['wednesday']}/procedures") == ["rollback.md"]
    # a forgotten note is gone from every instant, as forgetting asks; the rest of history stays
    assert len(names(provider, f"/.afi/at/{t['monday']}/history")) == 2
    assert len(names(provider, f"/.afi/at/{t['tuesday']}/history")) == 4
    assert b"lynx" not in b"".join(
        provider.read(OWNER, e.path).data for e in provider.list(OWNER, f"/.afi/at/{t['monday']}/history").entries
    )
    entry = provider.stat(OWNER, f"/.afi/at/{t['monday']}/facts/deploy.md")
    assert entry.type == "file" and entry.attributes["permissions"] == "r"
    folder = provider.stat(OWNER, f"/.afi/at/{t['monday']}")
    assert folder.type == "directory" and folder.mtime == t["monday"]
    assert "at" in names(provider, "/.afi") and names(provider, "/.afi/at") == []
    day = t["monday"][:10]
    assert provider.stat(OWNER, f"/.afi/at/{day}").type == "directory"  # a date alone is its midnight


def test_search_at_an_instant_answers_from_that_instant_in_every_mode(
    history: tuple[MemoryProvider, dict[str, str]],
) -> None:
    provider, t = history
    monday = f"/.afi/at/{t['monday']}"

    def grep(query: object, path: str) -> list[str]:
        page = provider.search(OWNER, SearchRequest.model_validate({"query": query, "path": path}))
        return [m.path for m in page.matches]

    assert grep("zebra", monday) == [f"{monday}/facts/deploy.md"]
    assert grep("okapi", monday) == []
    assert grep({"regex": "wal+rus"}, monday) == [f"{monday}/procedures/rollback.md"]
    assert grep("zebra", f"{monday}/history") and grep("zebra", f"{monday}/history")[0].startswith(f"{monday}/history/")
    assert grep("zebra", "/") == []  # today's tree has moved on
    tuesday = f"/.afi/at/{t['tuesday']}"
    assert grep("okapi", tuesday) == [f"{tuesday}/facts/deploy.md"] and grep("zebra", tuesday) == []
    semantic = provider.search(OWNER, SearchRequest(query=SemanticQuery(semantic="how do we deploy"), path=monday))
    assert [m.path for m in semantic.matches][:1] == [f"{monday}/facts/deploy.md"]
    assert "zebra" in semantic.matches[0].text
    later = provider.search(OWNER, SearchRequest(query=SemanticQuery(semantic="heron sheet rota"), path=monday))
    assert all("oncall" not in m.path for m in later.matches)  # written after Monday


@pytest.mark.parametrize(
    ("path", "error", "said"),
    [
        ("/.afi/at/last-monday/facts", NotFound, "no snapshot named 'last-monday'"),
        ("/.afi/at/1monday/facts", InvalidPath, "not an instant"),
        ("/.afi/at/9999-12-31T23:59:59-05:00/facts", InvalidPath, "not an instant"),  # past year 9999 in UTC
        ("/.afi/at/0001-01-01T00:00:00+05:00/facts", InvalidPath, "not an instant"),
        ("/.afi/at/2026-13-45/facts", InvalidPath, "not an instant"),
        ("/.afi/at/2026-11-30T10:00:00Z/working", NotFound, "keep no past yet"),
        ("/.afi/at/2026-11-30T10:00:00Z/files/nothing.txt", NotFound, "no such file or folder at this instant"),
        ("/.afi/at/2026-11-30T10:00:00Z/facts/a/b.md", NotFound, "flat"),
        ("/.afi/at/2026-11-30T10:00:00Z/facts/nothing.md", NotFound, "no such note"),
        ("/.afi/at/2026-11-30T10:00:00Z/facts/deploy.txt", NotFound, "<name>.md"),
    ],
)
def test_what_an_instant_refuses_is_said_plainly(
    history: tuple[MemoryProvider, dict[str, str]], path: str, error: type[Exception], said: str
) -> None:
    provider, _ = history
    with pytest.raises(error, match=said):
        provider.stat(OWNER, path)


def test_an_instant_is_read_only(history: tuple[MemoryProvider, dict[str, str]]) -> None:
    provider, t = history
    path = f"/.afi/at/{t['monday']}/facts/deploy.md"
    for attempt in (
        lambda: provider.write(OWNER, path, b"rewrite the past"),
        lambda: provider.delete(OWNER, path),
        lambda: provider.mkdir(OWNER, f"/.afi/at/{t['monday']}/facts/sub"),
    ):
        with pytest.raises(Forbidden, match="read-only"):
            attempt()
    assert b"zebra canary" in provider.read(OWNER, path).data


def test_saving_the_same_text_again_keeps_the_note_in_the_past(tmp_path: Path, store_url: str) -> None:
    provider = MemoryProvider(store_url, tmp_path / "files")
    provider.write(OWNER, "/facts/deploy.md", b"We deploy on Mondays")
    monday = instant()
    provider.write(OWNER, "/facts/deploy.md", b"We deploy on Mondays")  # an editor's re-save: the same note
    assert names(provider, f"/.afi/at/{monday}/facts") == ["deploy.md"]
    assert len(names(provider, f"/.afi/at/{monday}/history")) == 1
    changes = provider.diff(OWNER, monday, "now")
    assert (changes.added, changes.changed, changes.retired) == ([], [], [])
