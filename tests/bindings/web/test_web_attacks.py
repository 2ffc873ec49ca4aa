"""Hostile input against the web page (``/``, ``/ui/…``) and the admin routes of a real ``afi serve``.

Every stored string an attacker controls (note names and texts, tags and front matter, transcript
lines, audit paths, key names, search queries, error messages) is planted, then every page that can
show it is fetched: it must come back escaped, with the page's only script its own module, no
``on…=`` attribute and no ``javascript:`` link, and every HTML answer (error pages too) carries the
CSP and refuses framing. Then odd paths and query values, cross-space and non-admin keys, a foreign
Origin in keyless mode, YAML and Markdown bombs, and a few hundred random requests: no 500.
Each test states its figures (cases tried, failures) in its assertion messages.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest

from afi.auth.keys import KeyStore
from tests.support.servers import AfiServer, serve_store

XSS = "\"'><script>alert(1)</script><img src=x onerror=alert(2)>"
OWN_SCRIPTS = ("/ui/static/app.js", "/docs/static/swagger-ui-bundle.js", "/docs/static/docs.js")
NOTE = f"""---
name: {XSS!r}
tags: ["{XSS.replace('"', "'")}", plain]
supersedes: "{XSS.replace('"', "'")}"
importance: 0.5
x-evil: "{XSS.replace('"', "'")}"
---
# {XSS}
[click](javascript:alert(3)) <a href="javascript:alert(4)">raw</a> ![i](javascript:alert(5))
<iframe src="https://evil.example"></iframe>
"""


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class _Tags(HTMLParser):
    """The markup a browser would build: every script, event attribute and javascript: link."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "script" and named.get("src") not in OWN_SCRIPTS:
            self.found.append(f"<script {named}>")
        if tag in ("iframe", "object", "embed", "base") or (tag == "img" and named.get("src") == "x"):
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=…>")
            if name in ("href", "src", "action", "formaction") and (value or "").strip().lower().startswith(
                ("javascript:", "vbscript:", "data:text")
            ):
                self.found.append(f"<{tag} {name}={value!r}>")


def hostile_free(answer: httpx.Response) -> list[str]:
    """What is wrong with an HTML answer: a script that is not the page's own, an event attribute, a
    javascript: link, a planted tag, or a missing CSP (no inline script, no framing)."""
    if "text/html" not in answer.headers.get("content-type", ""):
        return []
    problems = []
    csp = answer.headers.get("content-security-policy", "")
    scripts = re.search(r"script-src ([^;]*)", csp)
    if "frame-ancestors 'none'" not in csp or scripts is None or "unsafe" in scripts.group(1):
        problems.append(f"CSP {csp!r}")
    if answer.headers.get("x-frame-options") != "DENY":
        problems.append("no X-Frame-Options")
    parser = _Tags()
    parser.feed(answer.text)
    return problems + parser.found


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    base = tmp_path_factory.mktemp("webattack")
    db, root = base / "afi.db", base / "files"
    keys = KeyStore(db)
    tokens = {
        "admin": keys.create(space="default", scopes=("afi:admin",), name=XSS)[1],
        "writer": keys.create(space="default", scopes=("afi:write",), name="writer")[1],
        "other": keys.create(space="other", scopes=("afi:admin",), name="other")[1],
    }
    keys.close()
    (root / "default").mkdir(parents=True)
    with serve_store(db, root) as running:
        running.tokens = tokens
        yield running


def _plant(server: AfiServer) -> list[str]:
    """Store the hostile strings everywhere they can go; return the paths that were stored."""
    stored = []
    with httpx.Client(base_url=server.url, headers=_bearer(server.tokens["admin"]), timeout=30) as api:
        for path, body in (("/facts/evil.md", NOTE), ("/procedures/evil.md", NOTE), ("/files/evil.md", NOTE),
                           ("/files/evil.txt", XSS), (f"/files/{XSS.replace('/', '')}.md", NOTE),
                           ("/files/a b&c<d>.txt", XSS)):  # fmt: skip
            if api.put("/afi/write", params={"path": path}, content=body.encode()).status_code == 200:
                stored.append(path)
        api.put("/afi/write", params={"path": f"/nowhere/{XSS}"}, content=b"x")  # refused, but audited
        assert api.post(f"/ledger/{XSS[:8]}s/append", json={"messages": [{"role": XSS, "text": XSS}]}).status_code < 500
        message = {"role": "user", "text": XSS + "\n[x] (y) z: " + XSS, "entry_id": "m<1>"}
        assert api.post("/ledger/s1/append", json={"messages": [message]}).status_code == 200
        assert api.post("/ledger/s1/scope.open", json={"name": XSS}).status_code < 500
        api.post("/ledger/s1/observe", json={"text": XSS, "source_entry_ids": ["m<1>"]})
        assert api.post("/keys", json={"scopes": ["afi:read"], "name": XSS}).status_code == 201
    return stored


def test_stored_strings_come_back_escaped_on_every_page(server: AfiServer) -> None:
    stored = _plant(server)
    assert len(stored) >= 4, stored
    with httpx.Client(base_url=server.url, headers=_bearer(server.tokens["admin"]), timeout=30) as web:
        sessions = web.get("/afi/list", params={"path": "/sessions"}).json()["entries"]
        episodes = web.get("/afi/list", params={"path": "/episodes"}).json()["entries"]
        pages: list[tuple[str, dict[str, Any]]] = [("/", {}), ("/ui/ledger", {}), ("/ui/audit", {}), ("/ui/keys", {})]
        pages += [("/ui/browse", {"path": p}) for p in ("/", "/facts", "/files", "/procedures", "/sessions")]
        pages += [("/ui/browse", {"path": p}) for p in stored]
        pages += [("/ui/edit", {"path": p}) for p in stored]
        pages += [("/ui/browse", {"path": e["path"]}) for e in sessions + episodes]
        pages += [("/ui/search", {"q": XSS, "mode": m}) for m in ("exact", "regex", "semantic")]
        pages += [("/ui/search", {"q": "script", "mode": m}) for m in ("exact", "regex", "semantic")]
        pages += [("/ui/search", {"q": "x", "mode": XSS}), ("/ui/browse", {"path": "/" + XSS}),
                  ("/ui/edit", {"path": "/facts/" + XSS}), ("/ui/new", {"folder": XSS}),
                  ("/ui/asof", {"at": XSS}), ("/ui/browse", {"path": "/", "cursor": XSS})]  # fmt: skip
        failures = []
        for route, params in pages:
            answer = web.get(route, params=params, follow_redirects=True)
            if answer.status_code >= 500 or hostile_free(answer) or "text/html" not in answer.headers["content-type"]:
                failures.append((route, params, answer.status_code, hostile_free(answer)))
            elif answer.status_code == 200 and route == "/ui/browse" and params.get("path") in stored:
                assert "&lt;script&gt;" in answer.text, (params, answer.text[:400])
    assert failures == [], f"{len(pages)} pages, {len(failures)} failures: {failures}"
    # the same pages as fragments (what the page's script swaps in) carry the same guard
    frag = httpx.get(server.url + "/ui/browse", params={"path": stored[0]},
                     headers={**_bearer(server.tokens["admin"]), "X-AFI-Fragment": "1"})  # fmt: skip
    assert frag.status_code == 200 and hostile_free(frag) == [] and "<html" not in frag.text


def test_odd_paths_and_query_values_never_answer_500(server: AfiServer) -> None:
    paths = ["..", "/..", "/../../etc/passwd", "/facts/../..", "%2e%2e", "/facts%2F..%2F", "/\x00", "/facts/a\x00b",
             "/" + "a/" * 3000, "/" + "x" * 5000, "/.afi/at/", "/.afi/at/not-a-time/", "/.afi/at/9999-99-99T99:99:99Z/",
             "/.afi/at/0000-01-01T00:00:00Z/facts", "/.afi/at/" + "9" * 400 + "/", "/.afi/at/../..", "\\", "//", "",
             "/facts/\u202e", "/facts/\xed\xa0\x80", "/%00", "~", "/." * 50]  # fmt: skip
    queries: list[tuple[str, dict[str, Any]]] = []
    for p in paths:
        queries += [("/ui/browse", {"path": p}), ("/ui/edit", {"path": p}), ("/ui/new", {"folder": p}),
                    ("/ui/asof", {"at": "2025-01-01T00:00:00Z", "path": p}), ("/ui/asof", {"at": p, "path": "/"}),
                    ("/ui/search", {"q": "x", "path": p})]  # fmt: skip
    regexes = ["(a+)+$", "(a|a)*b", "(?=x)", "\\1(a)", "[", "a{99999}", "(((((((((((a)))))))))))" * 40, "\\p{Zzzz}"]
    queries += [("/ui/search", {"q": r, "mode": "regex", "flags": f}) for r in regexes for f in ("", "i", "zz", "ims")]
    queries += [("/ui/audit", {"limit": v}) for v in ("-1", "0", "1", "1000", "1001", "9" * 40, "1e9", "x", "")]
    queries += [("/ui/search", {"q": "x", "mode": "semantic", "as_of": v}) for v in ("x", "-1", "9" * 50, "2025-13-45")]
    queries += [("/ui/browse", {"path": "/", "cursor": c}) for c in ("", "x", "-1", "9" * 500, "\x00", "eyJ" * 100)]
    queries += [("/ui/search", {"q": "q" * 5000}), ("/ui/search", {"q": "x", "flags": "i" * 100})]
    queries += [("/ui/static/" + name, {}) for name in ("..%2Fapp.py", "app.js%00", "../views.py", "x" * 300)]
    failures = []
    with httpx.Client(base_url=server.url, headers=_bearer(server.tokens["admin"]), timeout=60) as web:
        for route, params in queries:
            answer = web.get(route, params=params)
            if answer.status_code >= 500 or hostile_free(answer):
                failures.append((route, {k: str(v)[:40] for k, v in params.items()}, answer.status_code))
    assert failures == [], f"{len(queries)} requests, {len(failures)} failures: {failures[:10]}"


def test_yaml_and_markdown_bombs_render_small(server: AfiServer) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]  # 9^9 strings by reference
    bombs = {
        "/files/laughs.md": "---\n" + "\n".join(lines) + "\n---\nbody\n",
        "/files/deep.md": "---\na: " + "[" * 6000 + "]" * 6000 + "\n---\nbody\n",
        "/files/wide.md": "---\n" + "".join(f"k{i}: [a, b, c]\n" for i in range(60000)) + "---\nbody\n",
        "/files/quotes.md": "> " * 5000 + "x\n" + "- " * 5000 + "y\n" + "*" * 20000 + "\n" + "[" * 20000 + "\n",
        "/files/links.md": "[a](<" + "(" * 20000 + ">)\n" + "![" * 10000 + "\n" + "`" * 30000 + "\n",
    }
    failures = []
    with httpx.Client(base_url=server.url, headers=_bearer(server.tokens["admin"]), timeout=120) as web:
        for path, text in bombs.items():
            assert web.put("/afi/write", params={"path": path}, content=text.encode()).status_code == 200
            answer = web.get("/ui/browse", params={"path": path})
            if answer.status_code != 200 or len(answer.content) > 4 * len(text) + 100_000:
                failures.append((path, answer.status_code, len(answer.content)))
    assert failures == [], f"{len(bombs)} bombs, {len(failures)} failures: {failures}"


def test_admin_routes_refuse_other_spaces_and_non_admin_keys(server: AfiServer) -> None:
    tokens = server.tokens
    other_keys = httpx.get(server.url + "/keys", headers=_bearer(tokens["other"])).json()["keys"]
    cases: list[tuple[str, str, str, dict[str, Any], int]] = [
        ("GET", "/spaces/other/keys", "admin", {}, 401),
        ("POST", "/spaces/other/keys", "admin", {"json": {"scopes": ["afi:admin"]}}, 401),
        ("DELETE", f"/spaces/other/keys/{other_keys[0]['id']}", "admin", {}, 401),
        ("DELETE", f"/keys/{other_keys[0]['id']}", "admin", {}, 404),  # another space's key is not found here
        ("GET", "/spaces/other/audit", "admin", {}, 401),
        ("GET", "/keys", "writer", {}, 403),
        ("POST", "/keys", "writer", {"json": {"scopes": ["afi:admin"]}}, 403),
        ("DELETE", f"/keys/{other_keys[0]['id']}", "writer", {}, 403),
        ("POST", "/keys", "admin", {"json": {"scopes": ["afi:root"]}}, 400),
        ("POST", "/keys", "admin", {"json": {"scopes": ["afi:read"], "name": "n" * 201}}, 400),
        ("POST", "/keys", "admin", {"json": {"scopes": "afi:read"}}, 400),
        ("POST", "/keys", "admin", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 400),
        ("DELETE", "/keys/" + "k" * 3000, "admin", {}, 404),
        ("GET", "/ui/keys", "writer", {}, 403),
        ("GET", "/spaces/other/afi/stat?path=/", "admin", {}, 401),
    ]
    failures = []
    for method, path, who, extra, status in cases:
        headers = {**_bearer(tokens[who]), **extra.pop("headers", {})}
        answer = httpx.request(method, server.url + path, headers=headers, **extra)
        if answer.status_code != status:
            failures.append((method, path, who, answer.status_code, answer.text[:120]))
    assert failures == [], f"{len(cases)} cases, {len(failures)} failures: {failures}"
    still = httpx.get(server.url + "/keys", headers=_bearer(tokens["other"])).json()["keys"]
    assert [k["revoked_at"] for k in still] == [k["revoked_at"] for k in other_keys]


ROUTES = ["/", "/ui/browse", "/ui/edit", "/ui/new", "/ui/search", "/ui/ledger", "/ui/audit", "/ui/keys", "/ui/asof",
          "/ui/static/app.js", "/docs", "/audit", "/keys", "/spaces/default/keys", "/spaces/x/ui/browse"]  # fmt: skip
VALUES = ["", "/", "..", "/facts", "/files/evil.md", XSS, "\x00", "%", "%ff", "9" * 30, "-1", "😀", "/.afi/at/x/",
          "a" * 5000, "[", "(a+)+$", "\\", "\r\nX-Injected: 1"]  # fmt: skip
NAMES = ["path", "q", "mode", "limit", "cursor", "at", "folder", "flags", "as_of", "token", "access_token"]


def test_a_few_hundred_random_requests_never_answer_500(server: AfiServer) -> None:
    rng = random.Random(1617)
    headers_pool = [{}, _bearer(server.tokens["admin"]), _bearer(server.tokens["writer"]),
                    {"Authorization": "Bearer " + "x" * 10000}, {"Authorization": "Basic Zm9v"},
                    {"X-AFI-Fragment": "1"}, {"Origin": "https://evil.example"}]  # fmt: skip
    failures, tried = [], 0
    with httpx.Client(base_url=server.url, timeout=60) as web:
        for _ in range(400):
            route = rng.choice(ROUTES)
            params = {rng.choice(NAMES): rng.choice(VALUES) for _ in range(rng.randint(0, 3))}
            method = rng.choice(["GET", "GET", "GET", "POST", "DELETE", "HEAD", "PUT"])
            body = rng.choice([None, b"", b"{}", XSS.encode(), b"\xff" * 100])
            try:
                answer = web.request(method, route, params=params, headers=rng.choice(headers_pool), content=body)
            except httpx.LocalProtocolError:
                continue  # a header value httpx itself will not send
            tried += 1
            if answer.status_code >= 500 or hostile_free(answer) or "x-injected" in answer.headers:
                failures.append((method, route, {k: v[:40] for k, v in params.items()}, answer.status_code))
    assert tried >= 350 and failures == [], f"{tried} requests, {len(failures)} failures: {failures[:10]}"


def test_a_foreign_origin_cannot_write_in_keyless_mode(tmp_path: Path) -> None:
    writes: list[tuple[str, str, dict[str, Any]]] = [
        ("PUT", "/afi/write", {"params": {"path": "/files/pwned.txt"}, "content": b"x"}),
        ("PUT", "/spaces/default/afi/write", {"params": {"path": "/files/pwned.txt"}, "content": b"x"}),
        ("POST", "/afi/mkdir", {"json": {"path": "/files/pwned"}}),
        ("POST", "/afi/move", {"json": {"from": "/files/keep.txt", "to": "/files/pwned.txt"}}),
        ("DELETE", "/afi/delete", {"params": {"path": "/files/keep.txt"}}),
        ("POST", "/keys", {"json": {"scopes": ["afi:admin"]}}),
        ("DELETE", "/keys/key_x", {}),
        ("POST", "/ledger/s1/append", {"json": {"messages": [{"role": "user", "text": "x", "entry_id": "e"}]}}),
        ("POST", "/afi/search", {"json": {"query": "keep"}}),
        ("GET", "/ui/browse", {"params": {"path": "/files/keep.txt"}}),
        ("GET", "/keys", {}),
        ("GET", "/audit", {}),
    ]
    with serve_store(tmp_path / "afi.db", tmp_path / "files") as keyless:
        assert (
            httpx.put(keyless.url + "/afi/write", params={"path": "/files/keep.txt"}, content=b"keep").status_code
            == 200
        )
        failures = []
        for origin in ("https://evil.example", "null", "http://127.0.0.1.evil.example", "file://"):
            for method, path, extra in writes:
                answer = httpx.request(method, keyless.url + path, headers={"Origin": origin}, **extra)
                if answer.status_code != 403 or "keep" in answer.text:
                    failures.append((origin, method, path, answer.status_code))
        tried = 4 * len(writes)
        assert failures == [], f"{tried} requests, {len(failures)} failures: {failures}"
        assert httpx.get(keyless.url + "/afi/read", params={"path": "/files/keep.txt"}).text == "keep"
        assert httpx.get(keyless.url + "/afi/stat", params={"path": "/files/pwned.txt"}).status_code == 404
        assert httpx.get(keyless.url + "/keys").json()["keys"] == []
