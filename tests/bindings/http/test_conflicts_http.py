"""Open conflicts through the HTTP door and on the web page: a laptop's store synced with a served store
over HTTP, one name written on both sides; ``GET /sync/conflicts`` lists it for a reader, the space's
page and the keys page list it with links to both versions, and a write of the name closes it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from afi.app.sync import sync_stores
from afi.auth.keys import LOCAL_OWNER
from afi.providers.memory.provider import MemoryProvider
from tests.support.servers import AfiServer, serve_with_keys


@pytest.fixture
def server(tmp_path: Path) -> Iterator[AfiServer]:
    with serve_with_keys(tmp_path, {"admin": ("default", ("afi:admin",)), "reader": ("default", ("afi:read",)),
                                     "other": ("other", ("afi:admin",))}) as running:  # fmt: skip
        yield running


def _as(server: AfiServer, who: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.tokens[who]}"}, timeout=30)


def _sync(tmp_path: Path, server: AfiServer) -> Any:
    return sync_stores(tmp_path / "laptop.db", tmp_path / "laptop-files", server.url, space="default", pull=True,
                       push=True, dry_run=False, token=server.tokens["admin"])  # fmt: skip


def _conflicted(tmp_path: Path, server: AfiServer) -> tuple[str, str]:
    laptop = MemoryProvider(tmp_path / "laptop.db", tmp_path / "laptop-files")
    laptop.remember(LOCAL_OWNER, kind="fact", name="units", content="we use metric units")
    _sync(tmp_path, server)
    laptop.remember(LOCAL_OWNER, kind="fact", name="units", content="we use imperial units <b>now</b>")
    with _as(server, "admin") as admin:
        admin.put("/afi/write", params={"path": "/facts/units.md"}, content=b"we use SI units").raise_for_status()
    report = _sync(tmp_path, server)
    [conflict] = report.pulled.conflicts + report.pushed.conflicts
    return conflict.kept, conflict.retired


def _hrefs(html: str, table: str) -> list[str]:
    found = re.search(rf'<table class="{table}">.*?</table>', html, re.S)
    assert found is not None, f"no table.{table} on the page"
    return re.findall(r'href="([^"]+)"', found.group(0))


def test_a_reader_lists_open_conflicts_and_a_write_closes_them(tmp_path: Path, server: AfiServer) -> None:
    with _as(server, "reader") as reader:
        assert reader.get("/sync/conflicts").json() == {"conflicts": []}
        page = reader.get("/")
        assert page.status_code == 200 and 'class="conflicts"' not in page.text  # none open: no table
    winner, loser = _conflicted(tmp_path, server)
    with _as(server, "reader") as reader:
        listed = reader.get("/sync/conflicts")
        assert listed.status_code == 200, listed.text
        [conflict] = listed.json()["conflicts"]
        assert (conflict["path"], conflict["id"], [x["id"] for x in conflict["losers"]]) == (
            "/facts/units.md", winner, [loser]
        )  # fmt: skip
        assert reader.get("/spaces/default/sync/conflicts").json() == listed.json()
        page = reader.get("/")
        assert page.status_code == 200 and "1 open conflict " in page.text
        links = _hrefs(page.text, "conflicts")
        assert links == [
            "/ui/browse?path=%2Ffacts%2Funits.md",
            f"/ui/browse?path=%2Fhistory%2F{winner}.md",
            f"/ui/browse?path=%2Fhistory%2F{loser}.md",
        ]
        texts = [reader.get(link) for link in links]
        assert all(t.status_code == 200 for t in texts)
        both = {"imperial units &lt;b&gt;now&lt;/b&gt;", "SI units"}  # the page escapes what a note says
        assert {s for s in both if s in texts[1].text} | {s for s in both if s in texts[2].text} == both
        assert reader.get("/ui/keys").status_code == 403  # the keys page is an admin's; the space's page is not
    with _as(server, "admin") as admin:
        keys_page = admin.get("/ui/keys")
        assert keys_page.status_code == 200 and len(_hrefs(keys_page.text, "conflicts")) == 3
        text = admin.get("/afi/read", params={"path": "/facts/units.md"}).content
        admin.put("/afi/write", params={"path": "/facts/units.md"}, content=text).raise_for_status()  # saved as read
        assert admin.get("/sync/conflicts").json() == {"conflicts": []}
        assert 'class="conflicts"' not in admin.get("/").text
        assert "No open conflict." in admin.get("/ui/keys").text
    _sync(tmp_path, server)
    assert MemoryProvider(tmp_path / "laptop.db", tmp_path / "laptop-files").open_conflicts(LOCAL_OWNER) == []


def test_conflicts_are_refused_without_a_key_of_the_space(tmp_path: Path, server: AfiServer) -> None:
    _conflicted(tmp_path, server)
    assert httpx.get(server.url + "/sync/conflicts", timeout=30).status_code == 401
    with _as(server, "other") as other:
        assert other.get("/sync/conflicts").json() == {"conflicts": []}  # its own space has none
        refused = other.get("/spaces/default/sync/conflicts")
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
