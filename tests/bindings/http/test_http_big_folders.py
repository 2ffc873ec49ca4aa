"""Big folders through HTTP: a folder of 100,000 files put on disk behind the server's back.

Every page of a listing, of the web page's browse view and of an exact search costs what the page
holds, not the folder: counted as the file-system calls the server makes for it (``stat`` and
folder reads), never in seconds. Paging visits every name exactly once, and following a search's
cursors finds every match exactly once, while the index catches up with the folder a slice a page.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from afi.bindings.http.app import create_app
from afi.bindings.web import mount_web
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.workspace.file_index import SEARCH_REFRESH
from afi.providers.memory.workspace.folders import SETTLE_NS
from tests.support.servers import serve_app_in_thread

FILES = 100_000
LIMIT = 1000
SLACK = 16  # the calls a page makes besides its entries: the folder, its parents, the jail's checks


class Calls:
    """Counts the calls the server makes to the functions it is given, from one ``reset`` to the next."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.counts[name] = self.counts.get(name, 0) + 1
            return real(*args, **kwargs)

        return counted

    def reset(self) -> dict[str, int]:
        with self._lock:
            seen, self.counts = self.counts, {}
        return seen


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real server over a store whose workspace holds ``big/`` with FILES files made on disk."""
    base = tmp_path_factory.mktemp("big-folders")
    folder = base / "files" / "default" / "big"
    folder.mkdir(parents=True)
    for i in range(FILES):
        (folder / f"f{i:06d}.txt").write_bytes(b"line %d\n" % i)
    time.sleep(SETTLE_NS / 1e9 + 0.2)  # as a folder filled a while ago: its names may be kept
    provider = MemoryProvider(base / "afi.db", base / "files")
    app = create_app(provider)
    mount_web(app)  # as ``afi serve`` does: the web page beside the API
    with serve_app_in_thread(app) as url:
        # the space's first use in a process sweeps the temporary files a crash left: once, not a page's
        assert httpx.get(url + "/afi/stat", params={"path": "/files"}).status_code == 200
        yield url, folder


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    counter = Calls()
    for name in ("stat", "scandir", "listdir", "read"):
        monkeypatch.setattr(os, name, counter.wrap(name, getattr(os, name)))
    return counter


@pytest.mark.slow
def test_listing_pages_visit_every_name_once_each_for_its_own_entries(big: tuple[str, Path], calls: Calls) -> None:
    url, folder = big
    names, pages, over = [], 0, []
    cursor = None
    with httpx.Client(base_url=url, timeout=60) as http:
        while True:
            calls.reset()
            params = {"path": "/files/big", "limit": LIMIT, **({"cursor": cursor} if cursor else {})}
            page = http.get("/afi/list", params=params).json()
            work = calls.reset()
            pages += 1
            if work.get("stat", 0) > LIMIT + 1 + SLACK or work.get("scandir", 0) + work.get("listdir", 0) > 1:
                over.append((pages, work))
            names += [e["path"].rsplit("/", 1)[1] for e in page["entries"]]
            cursor = page.get("next_cursor")
            if not cursor:
                break
    assert over == [], f"{pages} pages, {len(over)} over {LIMIT + 1 + SLACK} stats or 1 folder read: {over[:5]}"
    assert names == sorted(os.listdir(folder)) and len(set(names)) == FILES
    assert pages == FILES // LIMIT


def test_a_glob_page_and_a_browse_page_cost_their_entries(big: tuple[str, Path], calls: Calls) -> None:
    url, _ = big
    with httpx.Client(base_url=url, timeout=60) as http:
        calls.reset()
        page = http.get("/afi/list", params={"path": "/files/big", "glob": "f09999*", "limit": 5}).json()
        work = calls.reset()
        assert [e["path"] for e in page["entries"]] == [f"/files/big/f09999{i}.txt" for i in range(5)]
        assert work.get("stat", 0) <= 6 + SLACK, work
        browse = http.get("/ui/browse", params={"path": "/files/big"})
        work = calls.reset()
        assert browse.status_code == 200 and "f000199.txt" in browse.text and "f000200.txt" not in browse.text
        assert work.get("stat", 0) <= 201 + 2 * SLACK, work


def _search_all(url: str, calls: Calls, query: str) -> tuple[list[tuple[str, int]], list[dict[str, int]]]:
    """Follow an exact search's cursors to its end; return the matches and each page's calls."""
    found, works = [], []
    cursor = None
    with httpx.Client(base_url=url, timeout=60) as http:
        while True:
            calls.reset()
            body = {"query": query, "path": "/files", "limit": 10, **({"cursor": cursor} if cursor else {})}
            answer = http.post("/afi/search", json=body)
            works.append(calls.reset())
            assert answer.status_code == 200, answer.text
            found += [(m["path"], m["line"]) for m in answer.json()["matches"]]
            cursor = answer.json().get("next_cursor")
            if not cursor:
                return found, works


@pytest.mark.slow
def test_search_pages_cost_a_slice_and_find_every_match_once(big: tuple[str, Path], calls: Calls) -> None:
    url, _ = big
    budget = SEARCH_REFRESH.files + 256  # the page's own slice, and the chunk that passes it
    expected = sorted((f"/files/big/f{i:06d}.txt", 1) for i in range(FILES) if str(i).startswith("4242"))
    for attempt in ("first", "again"):  # again: the index has caught up, and only stats remain
        found, works = _search_all(url, calls, "line 4242")
        over = [(n, w) for n, w in enumerate(works, 1) if w.get("stat", 0) > budget or w.get("read", 0) > budget]
        assert over == [], f"{attempt}: {len(works)} pages, {len(over)} over {budget} stats or reads: {over[:5]}"
        assert sorted(found) == expected and len(set(found)) == len(found), (attempt, len(found), len(expected))
    assert sum(w.get("read", 0) for w in works) <= len(works) * SLACK, works
