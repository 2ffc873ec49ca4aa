"""The audit and key routes, and /docs offline, against a real ``afi serve`` with keys in two spaces."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from afi.auth.keys import KeyStore
from tests.support.servers import AfiServer, serve_store


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    base = tmp_path_factory.mktemp("afi-admin")
    keys = KeyStore(base / "afi.db")
    wanted = (("admin", "default", "afi:admin"), ("writer", "default", "afi:write"),
              ("reader", "default", "afi:read"), ("other", "other", "afi:admin"))  # fmt: skip
    tokens = {name: keys.create(space=space, scopes=(scope,), name=name)[1] for name, space, scope in wanted}
    keys.close()
    with serve_store(base / "afi.db", base / "files") as running:
        running.tokens = tokens
        yield running


def _as(server: AfiServer, who: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.tokens[who]}"})


def test_audit_shows_the_callers_space_only(server: AfiServer) -> None:
    with _as(server, "writer") as writer, _as(server, "other") as other, _as(server, "reader") as reader:
        writer.put("/afi/write", params={"path": "/facts/mine.md"}, content=b"in default\n").raise_for_status()
        other.put("/afi/write", params={"path": "/facts/theirs.md"}, content=b"in other\n").raise_for_status()
        rows = reader.get("/audit").json()["rows"]
        assert {row["space"] for row in rows} == {"default"}
        assert any(row["path"] == "/facts/mine.md" and row["verb"] == "write" for row in rows)
        assert not any(row["path"] == "/facts/theirs.md" for row in rows)
        assert [r["path"] for r in other.get("/audit").json()["rows"]] == ["/facts/theirs.md"]
        assert reader.get("/audit", params={"limit": 0}).json()["error"]["code"] == "invalid_path"


def test_keys_need_admin_and_stay_in_their_space(server: AfiServer) -> None:
    with _as(server, "admin") as admin, _as(server, "writer") as writer, _as(server, "other") as other:
        refused = writer.get("/keys")
        assert refused.status_code == 403 and "afi:admin" in refused.json()["error"]["message"]
        listed = admin.get("/keys").json()["keys"]
        names = {k["name"] for k in listed}
        assert names >= {"admin", "writer", "reader"} and "other" not in names
        assert all("token" not in k and k["space"] == "default" for k in listed)

        made = admin.post("/keys", json={"scopes": ["afi:write"], "name": "laptop"})
        assert made.status_code == 201
        token, key_id = made.json()["token"], made.json()["id"]
        assert token.startswith("afi_")
        fresh = {"Authorization": f"Bearer {token}"}
        assert httpx.get(server.url + "/afi/stat", params={"path": "/facts"}, headers=fresh).status_code == 200
        assert token not in admin.get("/keys").text

        assert other.delete(f"/keys/{key_id}").status_code == 404  # another space's key does not exist for it
        assert admin.delete(f"/keys/{key_id}").json() == {"id": key_id, "revoked": True}
        assert admin.delete(f"/keys/{key_id}").status_code == 404
        assert httpx.get(server.url + "/afi/stat", params={"path": "/facts"}, headers=fresh).status_code == 401

        bad = admin.post("/keys", json={"scopes": ["afi:root"]})
        assert bad.status_code == 400 and "unknown scope" in bad.json()["error"]["message"]
        assert writer.post("/keys", json={"scopes": ["afi:admin"]}).status_code == 403
        verbs = [(r["verb"], r["result"]) for r in admin.get("/audit").json()["rows"]]
        assert ("key.create", "ok") in verbs and ("key.revoke", "ok") in verbs and ("key.create", "forbidden") in verbs


def test_docs_are_served_from_the_app_with_a_bearer_scheme(server: AfiServer) -> None:
    page = httpx.get(server.url + "/docs")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "<script>" not in page.text and "cdn" not in page.text.lower()
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "docs.js"):
        got = httpx.get(server.url + "/docs/static/" + asset)
        assert got.status_code == 200 and len(got.content) > 100, asset
    assert httpx.get(server.url + "/docs/static/..%2Fapp.py").status_code == 404
    schema = httpx.get(server.url + "/openapi.json").json()
    assert schema["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "an API key (afi token create), or none for the keyless owner on loopback",
    }
    assert {"bearer": []} in schema["security"]


def test_pages_render_on_the_server_through_the_same_door(server: AfiServer, tmp_path: Path) -> None:
    keyless = httpx.get(server.url + "/")
    assert keyless.status_code == 401 and "An API key is needed" in keyless.text
    assert "script-src 'self'" in keyless.headers["content-security-policy"]
    with _as(server, "writer") as writer, _as(server, "reader") as reader:
        writer.put("/afi/write", params={"path": "/facts/x.md"}, content=b"a <b>bold</b> claim\n").raise_for_status()
        fragment = reader.get("/ui/browse", params={"path": "/facts/x.md"}, headers={"X-AFI-Fragment": "1"})
        assert fragment.status_code == 200 and "<html" not in fragment.text
        assert "a &lt;b&gt;bold&lt;/b&gt; claim" in fragment.text and "Edit" not in fragment.text
        assert 'data-edit-controls="1"' in writer.get("/ui/browse", params={"path": "/facts/x.md"}).text
        for path, status in (("/ui/browse?path=/nowhere", 404), ("/ui/search?q=(&mode=regex", 400),
                             ("/ui/search?q=x&mode=fuzzy", 400), ("/ui/keys", 403), ("/ui/static/x.js", 404),
                             ("/ui/asof?at=&path=/facts", 400)):  # fmt: skip
            got = reader.get(path)
            assert got.status_code == status, (path, got.text[:300])
        moved = reader.get("/ui/asof", params={"at": "2020-01-01", "path": "/facts"}, follow_redirects=False)
        assert moved.status_code == 303
        assert moved.headers["location"] == "/ui/browse?path=%2F.afi%2Fat%2F2020-01-01%2Ffacts"
