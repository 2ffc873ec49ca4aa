"""The ledger over HTTP against a real ``afi serve``: POST /ledger/…, scopes, then read and search it back."""

from __future__ import annotations

from typing import Any

import httpx

from afi.bindings.http.app import create_app
from afi.provider import LedgerProvider
from afi.providers.memory.provider import MemoryProvider
from tests.support.servers import AfiServer, serve_app_in_thread


def _bearer(server: AfiServer, name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.tokens[name]}"}


def test_append_observe_and_search_over_http(afi_server: AfiServer) -> None:
    url, writer = afi_server.url, _bearer(afi_server, "writer")
    body = {"messages": [{"role": "user", "text": "We roll out with a canary", "entry_id": "h1"},
                         {"role": "assistant", "text": "Canary then fleet", "entry_id": "h2"}]}  # fmt: skip
    first = httpx.post(f"{url}/ledger/http-s1/append", json=body, headers=writer)
    assert first.status_code == 200, first.text
    assert [e["id"] for e in first.json()["entries"]] == ["h1", "h2"]
    again = httpx.post(f"{url}/ledger/http-s1/append", json=body, headers=writer)  # idempotent retry
    assert again.json()["entries"] == first.json()["entries"]
    obs = httpx.post(f"{url}/ledger/http-s1/observe", json={"text": "Deploys via canary", "source_entry_ids": ["h1"]},
                     headers=writer).json()["observation"]  # fmt: skip
    read = httpx.get(f"{url}/afi/read", params={"path": "/sessions/http-s1.md"}, headers=writer)
    assert read.status_code == 200 and "[h2]" in read.text and f"observation {obs['id']}" in read.text
    episode = httpx.get(f"{url}/afi/read", params={"path": f"/episodes/{obs['id']}.md"}, headers=writer)
    assert episode.status_code == 200 and "Deploys via canary" in episode.text
    search = httpx.post(f"{url}/afi/search", json={"query": {"conversation": "canary fleet", "session": "http-s1"}},
                        headers=_bearer(afi_server, "reader"))  # fmt: skip
    assert search.status_code == 200, search.text
    assert [m["x-id"] for m in search.json()["matches"]] == ["h2", "h1"]


def test_ledger_writes_are_refused_cleanly(afi_server: AfiServer) -> None:
    url = afi_server.url
    msg = {"messages": [{"role": "user", "text": "nope", "entry_id": "r1"}]}
    reader = httpx.post(f"{url}/ledger/http-s2/append", json=msg, headers=_bearer(afi_server, "reader"))
    assert reader.status_code == 403 and reader.json()["error"]["code"] == "forbidden"
    anonymous = httpx.post(f"{url}/ledger/http-s2/append", json=msg)
    assert anonymous.status_code == 401
    robot = {"messages": [{"role": "robot", "text": "x", "entry_id": "r"}]}
    bad = httpx.post(f"{url}/ledger/http-s2/append", json=robot, headers=_bearer(afi_server, "writer"))
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_path"
    conflict = httpx.post(f"{url}/ledger/http-s2/append", headers=_bearer(afi_server, "writer"),
                          json={"messages": [{"role": "user", "text": "a", "entry_id": "c1"}]})  # fmt: skip
    assert conflict.status_code == 200
    changed = httpx.post(f"{url}/ledger/http-s2/append", headers=_bearer(afi_server, "writer"),
                         json={"messages": [{"role": "user", "text": "b", "entry_id": "c1"}]})  # fmt: skip
    assert changed.status_code == 409
    unknown = httpx.post(f"{url}/ledger/http-s2/explode", json={}, headers=_bearer(afi_server, "writer"))
    assert unknown.status_code == 400
    read = httpx.get(f"{url}/afi/read", params={"path": "/sessions/http-s2.md"}, headers=_bearer(afi_server, "writer"))
    assert "nope" not in read.text and "[c1]" in read.text and ": a" in read.text


class _NoLedger:
    """The AFI verbs of a memory provider and nothing else: a provider that keeps no ledger."""

    def __init__(self, inner: MemoryProvider) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name not in _AFI_VERBS:
            raise AttributeError(name)
        return getattr(self._inner, name)


_AFI_VERBS = {"manifest", "authenticate", "stat", "list", "read", "search", "write", "mkdir", "delete", "move"}


def test_ledger_routes_follow_the_ledger_protocol(memory_provider: MemoryProvider) -> None:
    assert isinstance(memory_provider, LedgerProvider)
    plain = _NoLedger(memory_provider)
    assert not isinstance(plain, LedgerProvider)
    msg = {"messages": [{"role": "user", "text": "hello", "entry_id": "n1"}]}
    with serve_app_in_thread(create_app(plain)) as url:  # type: ignore[arg-type]
        refused = httpx.post(f"{url}/ledger/s1/append", json=msg)
        assert refused.status_code == 405, refused.text
        assert refused.json()["error"]["code"] == "unsupported"
        assert httpx.get(f"{url}/afi/stat", params={"path": "/facts"}).status_code == 200
    with serve_app_in_thread(create_app(memory_provider)) as url:
        assert httpx.post(f"{url}/ledger/s1/append", json=msg).status_code == 200
