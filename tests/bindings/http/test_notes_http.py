"""``POST /notes/remember`` against a real server: a batch in one transaction, refusals that name the item."""

from __future__ import annotations

from typing import Any

import httpx

from afi.bindings.http.app import create_app
from afi.provider import NotesProvider
from afi.providers.memory.fabric.batch import MAX_BATCH_NOTES
from afi.providers.memory.provider import MemoryProvider
from tests.support.servers import AfiServer, serve_app_in_thread


def _bearer(server: AfiServer, name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.tokens[name]}"}


def test_a_batch_is_remembered_and_read_back(afi_server: AfiServer) -> None:
    url, writer = afi_server.url, _bearer(afi_server, "writer")
    body = {"notes": [
        {"kind": "fact", "content": "the batch door writes in one transaction", "name": "http-batch-a"},
        {"kind": "fact", "content": "the batch door writes in one transaction", "name": "http-batch-a"},
        {"kind": "procedure", "content": "post the notes, read them back", "name": "http-batch-b"},
    ]}  # fmt: skip
    answer = httpx.post(f"{url}/notes/remember", json=body, headers=writer)
    assert answer.status_code == 200, answer.text
    notes = answer.json()["notes"]
    assert [(n["kind"], n["name"]) for n in notes] == [("fact", "http-batch-a"), ("fact", "http-batch-a"),
                                                       ("procedure", "http-batch-b")]  # fmt: skip
    assert notes[0]["id"] == notes[1]["id"]  # the restatement folded into the first
    read = httpx.get(f"{url}/afi/read", params={"path": "/procedures/http-batch-b.md"}, headers=writer)
    assert read.status_code == 200 and "read them back" in read.text


def test_a_batch_is_refused_whole(afi_server: AfiServer) -> None:
    url, writer = afi_server.url, _bearer(afi_server, "writer")
    bad = {"notes": [{"kind": "fact", "content": "fine", "name": "http-batch-c"},
                     {"kind": "fact", "content": "x", "importance": 3}]}  # fmt: skip
    refused = httpx.post(f"{url}/notes/remember", json=bad, headers=writer)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_path"
    assert refused.json()["error"]["message"].startswith("notes[1]: ")
    missing = httpx.get(f"{url}/afi/stat", params={"path": "/facts/http-batch-c.md"}, headers=writer)
    assert missing.status_code == 404
    reader = httpx.post(f"{url}/notes/remember", json={"notes": [{"kind": "fact", "content": "no"}]},
                        headers=_bearer(afi_server, "reader"))  # fmt: skip
    assert reader.status_code == 403 and reader.json()["error"]["code"] == "forbidden"
    over = {"notes": [{"kind": "fact", "content": f"n{i}"} for i in range(MAX_BATCH_NOTES + 1)]}
    too_many = httpx.post(f"{url}/notes/remember", json=over, headers=writer)
    assert too_many.status_code == 413 and too_many.json()["error"]["code"] == "too_large"
    shapeless = httpx.post(f"{url}/notes/remember", json={"notes": "text"}, headers=writer)
    assert shapeless.status_code == 400


class _NoNotes:
    """The AFI verbs of a memory provider and nothing else: a provider that remembers no notes."""

    def __init__(self, inner: MemoryProvider) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name not in {"manifest", "authenticate", "stat", "list", "read", "search", "write", "mkdir", "delete",
                        "move"}:  # fmt: skip
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_the_batch_route_follows_the_notes_protocol(memory_provider: MemoryProvider) -> None:
    assert isinstance(memory_provider, NotesProvider)
    plain = _NoNotes(memory_provider)
    assert not isinstance(plain, NotesProvider)
    with serve_app_in_thread(create_app(plain)) as url:  # type: ignore[arg-type]
        refused = httpx.post(f"{url}/notes/remember", json={"notes": []})
        assert refused.status_code == 405 and refused.json()["error"]["code"] == "unsupported"
