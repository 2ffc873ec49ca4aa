"""What a note version says it is, read through a real ``afi serve`` on each engine: in ``/history``
a retired version is ``superseded`` (naming its successor) or ``expired``, not ``active``; under
``/.afi/at/<instant>/`` a version reads as it stood then, without the ``valid_to`` or times a later
write gave it; search greps that same text; stat and list give its size; the web page's timeline
says current, superseded or expired."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import yaml

from tests.support import warm
from tests.support.doors import instant
from tests.support.servers import start_afi_serve

SCHEDULED_END = "2099-01-01T00:00:00.000Z"
_TIMES = ("valid_from", "valid_to", "created_at", "ingested_at", "updated_at")


@dataclass(frozen=True)
class Story:
    """A served store where x was rewritten after ``monday`` (the snapshot ``mid``), y expired and z
    carries an end written with it."""

    url: str
    monday: str
    ids: dict[str, str]  # x1 (superseded), x2 (current), y (expired), z (scheduled end)

    def get(self, route: str, **params: Any) -> httpx.Response:
        answer = httpx.get(self.url + route, params=params, timeout=30)
        assert answer.status_code == 200, (route, params, answer.text)
        return answer

    def read(self, path: str) -> str:
        return self.get("/afi/read", path=path).text

    def grep(self, query: str | dict[str, str], path: str) -> list[tuple[str, str]]:
        answer = httpx.post(self.url + "/afi/search", json={"query": query, "path": path, "limit": 100}, timeout=30)
        assert answer.status_code == 200, answer.text
        return [(m["path"], m["text"]) for m in answer.json()["matches"]]


def _put(url: str, path: str, body: str) -> str:
    answer = httpx.put(f"{url}/afi/write", params={"path": path}, content=body.encode(), timeout=30)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["attributes"]["x-id"])


def _front(text: str) -> dict[str, Any]:
    loaded = yaml.safe_load(text.split("---\n")[1])
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def story(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    base = tmp_path_factory.mktemp(f"versions-{request.param}")
    pg = request.getfixturevalue("postgres_databases") if request.param == "postgresql" else None
    db = pg.fresh() if pg is not None else str(base / "afi.db")
    try:
        with start_afi_serve(db, base / "files") as server:
            ids = {"z": _put(server.url, "/facts/z.md", f"---\nvalid_to: '{SCHEDULED_END}'\n---\nzebu until 2099")}
            ids["x1"] = _put(server.url, "/facts/x.md", "first version of x, a zebra")
            monday = instant()
            made = warm.run(
                [sys.executable, "-c", "from afi.cli import main; main()", "snapshot", "create", "mid", "--at", monday,
                 "--db", db, "--root", str(base / "files")],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
            ids["x2"] = _put(server.url, "/facts/x.md", "second version of x, an okapi")
            soon = (datetime.now(UTC) + timedelta(seconds=1)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            ids["y"] = _put(server.url, "/facts/y.md", f"---\nvalid_to: '{soon}'\n---\na tapir, for a moment")
            time.sleep(1.2)
            yield Story(server.url, monday, ids)
    finally:
        if pg is not None:
            pg.drop(db)


def test_history_says_superseded_expired_or_active(story: Story) -> None:
    ids = story.ids
    old = story.read(f"/history/{ids['x1']}.md")
    assert f"\nstatus: superseded\nsuperseded_by: {ids['x2']}\n" in old and "status: active" not in old, old
    assert _front(old)["valid_to"] <= _front(story.read(f"/history/{ids['x2']}.md"))["created_at"]
    expired = story.read(f"/history/{ids['y']}.md")
    assert "\nstatus: expired\n" in expired and "superseded_by" not in expired, expired
    for current in (f"/history/{ids['x2']}.md", f"/history/{ids['z']}.md", "/facts/x.md", "/facts/z.md"):
        assert "\nstatus: active\n" in story.read(current), current


@pytest.mark.parametrize("at", ["monday", "mid"])
def test_a_version_reads_as_it_stood_at_the_instant(story: Story, at: str) -> None:
    segment = story.monday if at == "monday" else "mid"
    x1 = story.ids["x1"]
    for path in (f"/.afi/at/{segment}/facts/x.md", f"/.afi/at/{segment}/history/{x1}.md"):
        text = story.read(path)
        front = _front(text)
        assert front["id"] == x1 and front["status"] == "active" and "valid_to" not in front, (path, text)
        later = {k: front[k] for k in _TIMES if k in front and str(front[k]) > story.monday}
        assert later == {}, (path, text)
        stat = story.get("/afi/stat", path=path).json()
        assert stat["size"] == len(text.encode()) and stat["mtime"] <= story.monday, (stat, text)
    scheduled = _front(story.read(f"/.afi/at/{segment}/facts/z.md"))
    assert scheduled["valid_to"] == SCHEDULED_END and scheduled["status"] == "active"


def test_listed_sizes_and_times_are_those_of_the_text_read(story: Story) -> None:
    checked = 0
    for folder in ("/history", "/.afi/at/mid/history", "/.afi/at/mid/facts", "/facts"):
        for entry in story.get("/afi/list", path=folder).json()["entries"]:
            if entry["type"] != "file":
                continue
            text = story.read(entry["path"]).encode()
            stat = story.get("/afi/stat", path=entry["path"]).json()
            assert entry["size"] == len(text) == stat["size"], (entry, stat, text)
            assert entry["mtime"] == stat["mtime"] and entry["etag"] == stat["etag"], (entry, stat)
            if folder.startswith("/.afi/at/"):
                assert entry["mtime"] <= story.monday, entry
            checked += 1
    assert checked >= 8, checked


def test_search_greps_the_text_a_read_shows(story: Story) -> None:
    ids = story.ids
    assert story.grep("status: superseded", "/history") == [(f"/history/{ids['x1']}.md", "status: superseded")]
    assert story.grep("status: expired", "/history") == [(f"/history/{ids['y']}.md", "status: expired")]
    successor = sorted(story.grep(ids["x2"], "/history"))
    assert successor == sorted([(f"/history/{ids['x1']}.md", f"superseded_by: {ids['x2']}"),
                                (f"/history/{ids['x2']}.md", f"id: {ids['x2']}")]), successor  # fmt: skip
    assert story.grep({"regex": r"^superseded_by: [0-9a-f]+$"}, "/history") == [
        (f"/history/{ids['x1']}.md", f"superseded_by: {ids['x2']}")
    ]
    # the past: what a read there shows, nothing a later write added
    assert story.grep("updated_at", "/.afi/at/mid") == []
    assert [path for path, _ in story.grep("valid_to", "/.afi/at/mid")] == ["/.afi/at/mid/facts/z.md"]
    in_history = [path for path, _ in story.grep("valid_to", "/.afi/at/mid/history")]
    assert in_history == [f"/.afi/at/mid/history/{ids['z']}.md"], in_history
    assert story.grep("status: superseded", "/.afi/at/mid") == []
    active = sorted(path for path, _ in story.grep({"regex": "^status: active$"}, "/.afi/at/mid/history"))
    assert active == sorted(f"/.afi/at/mid/history/{ids[k]}.md" for k in ("x1", "z")), active


def _timeline(page: str) -> list[str]:
    """The page's timeline, one line a version (the one shown marked ``*``)."""
    found = re.search(r'<ol class="timeline">(.*?)</ol>', page, re.S)
    assert found is not None, page
    return [("* " if 'aria-current="true"' in li[:40] else "") + re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", li)).strip()
            for li in re.findall(r"<li.*?</li>", found.group(1), re.S)]  # fmt: skip


def test_the_web_timeline_says_what_each_version_is(story: Story) -> None:
    x1, x2 = story.ids["x1"], story.ids["x2"]
    items = _timeline(story.get("/ui/browse", path="/facts/x.md").text)
    assert len(items) == 2 and items[0].startswith(f"* {x2}") and items[1].startswith(x1), items
    assert items[0].endswith("· current") and items[1].endswith("· superseded"), items
    # from the old version: its successor too, and a link to it among its fields
    old = story.get("/ui/browse", path=f"/history/{x1}.md").text
    items = _timeline(old)
    assert len(items) == 2 and items[0].startswith(x2) and items[1].startswith(f"* {x1}"), items
    assert f'<dt>superseded_by</dt><dd><a href="/ui/browse?path=%2Fhistory%2F{x2}.md">{x2}</a>' in old
    expired = story.get("/ui/browse", path=f"/history/{story.ids['y']}.md").text
    assert "· expired" in expired and "· active" not in expired
    past = story.get("/ui/browse", path="/.afi/at/mid/facts/x.md").text
    assert "· current" in past and "· superseded" not in past and "· active" not in past
