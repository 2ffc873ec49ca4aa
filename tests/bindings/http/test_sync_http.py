"""Sync through the HTTP door: a laptop's store and an ``afi serve`` in step both ways with an admin key,
refusals for keys that may not sync and for batches no store sends, and every answer an AFI error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from afi.app.sync import sync_stores
from afi.auth.keys import LOCAL_OWNER
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.sync.states import state_of
from tests.support.servers import AfiServer, serve_with_keys


@pytest.fixture
def server(tmp_path: Path) -> Iterator[AfiServer]:
    with serve_with_keys(tmp_path, {"admin": ("default", ("afi:admin",)), "writer": ("default", ("afi:write",)),
                                     "other": ("other", ("afi:admin",))}) as running:  # fmt: skip
        yield running


def _versions(db: Path | str, root: Path) -> dict[str, dict[str, Any]]:
    memory = MemoryProvider(db, root).fabric("default").memory
    return {note.id: state_of(note) for note in memory.store.select_notes(memory.scope)}


def _sync(tmp_path: Path, server: AfiServer, token: str, **kw: Any) -> Any:
    return sync_stores(tmp_path / "laptop.db", tmp_path / "laptop-files", server.url, space="default",
                       pull=kw.get("pull", True), push=kw.get("push", True), dry_run=False, token=token)  # fmt: skip


def test_a_laptop_and_a_server_in_step_through_the_http_door(tmp_path: Path, server: AfiServer) -> None:
    laptop = MemoryProvider(tmp_path / "laptop.db", tmp_path / "laptop-files")
    laptop.remember(LOCAL_OWNER, kind="fact", name="units", content="we use metric units")
    admin = {"Authorization": f"Bearer {server.tokens['admin']}"}
    httpx.put(server.url + "/afi/write", params={"path": "/facts/deploy.md"}, content=b"deploys go out on tuesdays",
              headers=admin, timeout=30).raise_for_status()  # fmt: skip
    laptop.write(LOCAL_OWNER, "/files/plan.md", b"# the plan\n")
    httpx.put(server.url + "/afi/write", params={"path": "/files/img.bin"}, content=bytes(range(256)) * 64,
              headers=admin, timeout=30).raise_for_status()  # fmt: skip
    first = _sync(tmp_path, server, server.tokens["admin"])
    assert (first.pulled.inserted, first.pushed.inserted) == (1, 2)  # plan.md's file note went with it
    assert (first.pulled.files_written, first.pushed.files_written) == (1, 1)
    assert (tmp_path / "laptop-files" / "default" / "img.bin").read_bytes() == bytes(range(256)) * 64
    assert (
        httpx.get(server.url + "/afi/read", params={"path": "/files/plan.md"}, headers=admin).content == b"# the plan\n"
    )
    assert _versions(tmp_path / "laptop.db", tmp_path / "laptop-files") == _versions(server.db, server.root)
    again = _sync(tmp_path, server, server.tokens["admin"])
    assert again.pulled.notes == again.pushed.notes == again.pulled.file_versions == again.pushed.file_versions == 0

    laptop.remember(LOCAL_OWNER, kind="fact", name="units", content="we use imperial units")
    httpx.put(server.url + "/afi/write", params={"path": "/facts/units.md"}, content=b"we use SI units",
              headers=admin, timeout=30).raise_for_status()  # fmt: skip
    report = _sync(tmp_path, server, server.tokens["admin"])
    assert len(report.pulled.conflicts + report.pushed.conflicts) == 1
    assert _versions(tmp_path / "laptop.db", tmp_path / "laptop-files") == _versions(server.db, server.root)
    peers = MemoryProvider(server.db, server.root).sync_peers()
    assert [p.label.endswith(str(tmp_path / "laptop.db")) for p in peers] == [True]
    audit = httpx.get(server.url + "/audit", headers=admin, timeout=30)
    assert audit.status_code == 200 and '"sync"' in audit.text, audit.text[:300]
    page = httpx.get(server.url + "/ui/keys", headers=admin, timeout=30)  # the web page names the peer
    assert page.status_code == 200 and "Synced with 1 store" in page.text and str(tmp_path / "laptop.db") in page.text


def test_the_ledger_blocks_and_snapshots_through_the_http_door(tmp_path: Path, server: AfiServer) -> None:
    laptop = MemoryProvider(tmp_path / "laptop.db", tmp_path / "laptop-files")
    admin = {"Authorization": f"Bearer {server.tokens['admin']}"}
    laptop.ledger_write(
        LOCAL_OWNER, "append", "chat", {"messages": [{"role": "user", "text": "from the laptop", "entry_id": "l1"}]}
    )
    laptop.append_block(LOCAL_OWNER, "plan", "ship sync")
    laptop.snapshot_create(LOCAL_OWNER, "before-trip")
    said = {"messages": [{"role": "assistant", "text": "from the server", "entry_id": "s1"}]}
    httpx.post(server.url + "/ledger/chat/append", headers=admin, timeout=30, json=said).raise_for_status()
    first = _sync(tmp_path, server, server.tokens["admin"])
    assert (first.pulled.ledger_entries, first.pushed.ledger_entries) == (1, 1)
    assert (first.pulled.blocks, first.pushed.blocks, first.pushed.snapshots) == (0, 1, 1)
    transcript = httpx.get(server.url + "/afi/read", params={"path": "/sessions/chat.md"}, headers=admin).text
    assert "from the laptop" in transcript and "from the server" in transcript
    assert transcript == laptop.read(LOCAL_OWNER, "/sessions/chat.md").data.decode()
    block = httpx.get(server.url + "/afi/read", params={"path": "/working/plan.md"}, headers=admin)
    assert "ship sync" in block.text
    state = httpx.get(server.url + "/sync/state", headers=admin, timeout=30).json()
    assert [s["name"] for s in state["snapshots"]] == ["before-trip"] and list(state["blocks"]) == ["plan"]
    again = _sync(tmp_path, server, server.tokens["admin"])
    assert again.pulled.ledger_entries == again.pushed.ledger_entries == again.pushed.blocks == 0
    verbs = [row["verb"] for row in MemoryProvider(server.db, server.root).audit.recent(limit=50)]
    assert "sync.send" in verbs and "sync" in verbs  # on the server's record: what it sent, what it applied
    here = [row["verb"] for row in laptop.audit.recent(limit=50)]
    assert "sync" in here and "sync.send" in here  # and on the laptop's: what it pushed, what it pulled


def test_keys_that_may_not_sync_and_bad_batches_are_refused(tmp_path: Path, server: AfiServer) -> None:
    url = server.url
    writer = {"Authorization": f"Bearer {server.tokens['writer']}"}
    admin = {"Authorization": f"Bearer {server.tokens['admin']}"}
    store = httpx.get(url + "/sync/store", headers=admin, timeout=30).json()["store"]
    good = {"store": "a" * 32, "space": "default", "since": 0, "upto": 1, "more": False, "notes": [], "forgotten": []}
    ledger = {"store": "a" * 32, "space": "default", "since": 0, "upto": 1, "more": False}
    state = {"store": "a" * 32, "space": "default", "version": 1, "blocks": {}, "snapshots": [], "dropped": [],
             "folders": {}}  # fmt: skip
    cases: list[tuple[str, str, dict[str, str], dict[str, Any], Any, int, str]] = [
        ("GET", "/sync/changes", writer, {"peer": "x"}, None, 403, "forbidden"),
        ("GET", "/sync/store", {}, {}, None, 401, "unauthorized"),
        ("POST", "/sync/apply", writer, {}, good, 403, "forbidden"),
        ("GET", "/sync/changes", admin, {}, None, 400, "invalid_path"),
        ("GET", "/sync/changes", admin, {"peer": "x", "since": "-1"}, None, 400, "invalid_path"),
        ("GET", "/sync/changes", admin, {"peer": "x", "since": "9" * 30}, None, 400, "invalid_path"),
        ("POST", "/sync/apply", admin, {}, {**good, "space": "other"}, 400, "invalid_path"),
        ("POST", "/sync/apply", admin, {}, {**good, "notes": [{"id": "x"}]}, 400, "invalid_path"),
        ("POST", "/sync/apply", admin, {}, {**good, "notes": "x"}, 400, "invalid_path"),
        ("POST", "/sync/apply", admin, {}, [1, 2], 400, "invalid_path"),
        ("POST", "/sync/apply", admin, {}, {**good, "forgotten": [None]}, 400, "invalid_path"),
        ("POST", "/sync/apply", admin, {}, {**good, "notes": [{}] * 501}, 413, "too_large"),
        ("POST", "/spaces/other/sync/apply", admin, {}, good, 401, "unauthorized"),
        ("GET", "/sync/files/changes", writer, {"peer": "x"}, None, 403, "forbidden"),
        (
            "POST",
            "/sync/files/apply",
            admin,
            {},
            {**good, "versions": [{"path": "../x"}], "blobs": {}},
            400,
            "invalid_path",
        ),
        ("POST", "/sync/files/apply", admin, {}, {"versions": []}, 400, "invalid_path"),
        ("GET", "/sync/ledger/changes", writer, {"peer": "x"}, None, 403, "forbidden"),
        ("GET", "/sync/ledger/received", admin, {}, None, 400, "invalid_path"),
        ("POST", "/sync/ledger/apply", writer, {}, {**ledger, "entries": []}, 403, "forbidden"),
        ("POST", "/sync/ledger/apply", admin, {}, {**ledger, "entries": [{"session": "x"}]}, 400, "invalid_path"),
        ("POST", "/sync/ledger/apply", admin, {}, {**ledger, "space": "other", "entries": []}, 400, "invalid_path"),
        ("POST", "/sync/ledger/apply", admin, {}, {**ledger, "entries": [{}] * 501}, 413, "too_large"),
        ("GET", "/sync/state", writer, {}, None, 403, "forbidden"),
        ("POST", "/sync/state", admin, {}, {**state, "blocks": {"Bad": {"content": "x"}}}, 400, "invalid_path"),
        ("POST", "/sync/state", admin, {}, {**state, "space": "other"}, 400, "invalid_path"),
        ("POST", "/sync/state", admin, {}, {**state, "blocks": []}, 400, "invalid_path"),
        ("POST", "/sync/state", admin, {}, "state", 400, "invalid_path"),
    ]
    for method, route, headers, params, body, status, code in cases:
        response = httpx.request(method, url + route, headers=headers, params=params, json=body, timeout=30)
        assert response.status_code == status, (route, body, response.text)
        assert response.json()["error"]["code"] == code, (route, response.text)
    empty = httpx.post(url + "/sync/apply", headers=admin, content=b"{not json", timeout=30)
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "invalid_path"
    assert _versions(server.db, server.root) == {}
    assert MemoryProvider(server.db, server.root).sync_peers() == []
    assert len(store) == 32
