"""Client ID metadata documents (CIMD) against a real ``afi serve``: the document is served by a real
HTTPS server on loopback (a test CA's certificate, trusted with ``--client-metadata-ca``; the host
allowed with ``--client-metadata-allow-host 127.0.0.1``).

The MCP SDK's own OAuth client with ``client_metadata_url=`` completes the whole flow and calls
``afi.read``; the client is listed, refreshes and is revoked; then every refusal the fetch has (a
``client_id`` other than the URL, http, hosts that resolve to non-public addresses, a redirect URI
not in the document, oversized, not JSON, a redirect, slow or unreachable hosts, a secret-based auth
method) is a clear ``invalid_client``, never a 5xx; each states its figures.
"""

from __future__ import annotations

import gzip
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from afi.auth.audit import AuditLog
from afi.storage.database import open_database
from tests.support import warm
from tests.support.cli import afi
from tests.support.servers import AfiServer
from tests.support.tls import HttpsServer, Reply, https_server

from .test_oauth_flow import REDIRECT, _pkce, approve, oauth_server, sdk_read, stat, tokens_for

JSON = {"Content-Type": "application/json"}
GZIP = {"Content-Encoding": "gzip"}  # 10 KB sent, 10 MB once inflated


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsServer]:
    with https_server(tmp_path_factory.mktemp("cimd-tls")) as running:
        yield running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, docs: HttpsServer) -> Iterator[AfiServer]:
    args = ("--client-metadata-allow-host", "127.0.0.1", "--client-metadata-ca", str(docs.ca_file))
    with oauth_server(tmp_path_factory.mktemp("cimd"), b"hello cimd\n", *args) as running:
        yield running


def publish(docs: HttpsServer, path: str, **fields: Any) -> str:
    """Serve a client's metadata document at ``path``; return its URL (the client id)."""
    url = docs.url + path
    document = {"client_id": url, "client_name": "A published agent", "redirect_uris": [REDIRECT], **fields}
    docs.routes[path] = Reply(json.dumps(document).encode(), headers={**JSON, "Cache-Control": "max-age=600"})
    return url


def authorize_params(client_id: str, redirect_uri: str = REDIRECT) -> dict[str, str]:
    _, challenge = _pkce()
    return {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "state": "s",
            "code_challenge": challenge, "code_challenge_method": "S256"}  # fmt: skip


def test_metadata_says_documents_are_supported(server: AfiServer) -> None:
    meta = httpx.get(server.url + "/.well-known/oauth-authorization-server").json()
    assert meta["client_id_metadata_document_supported"] is True


def test_the_mcp_sdk_client_with_a_metadata_url_gets_consent_reads_refreshes_and_is_revoked(
    server: AfiServer, docs: HttpsServer
) -> None:
    path = "/agents/sdk-client.json"
    url = publish(docs, path, grant_types=["authorization_code", "refresh_token"], token_endpoint_auth_method="none")
    pages: list[str] = []

    def owner(http: httpx.Client, authorize_url: str) -> httpx.Response:
        assert parse_qs(urlsplit(authorize_url).query)["client_id"] == [url]  # no registration happened
        parked = http.get(authorize_url)
        pages.append(http.get(parked.headers["location"]).text)
        return approve(http, authorize_url, server.tokens["admin"])

    read, storage = sdk_read(server, "A published agent", owner, client_metadata_url=url)
    assert read == "hello cimd\n"
    registered = registrations(server)
    assert storage.client is not None and storage.client.client_id == url and url not in registered
    # the consent page named the client as its document does, and the host that publishes it
    assert "A published agent" in pages[0] and "Described by" in pages[0] and "127.0.0.1" in pages[0]
    assert url in pages[0]
    tokens = storage.tokens
    assert tokens is not None and tokens.access_token.startswith("afi_oat_") and tokens.refresh_token
    assert docs.hits[path] == 1  # fetched once, then served from the cache (max-age=600)
    # a public client refreshes without a secret; the rotated token works over plain HTTP
    fresh = httpx.post(server.url + "/oauth/token", data={"grant_type": "refresh_token", "client_id": url,
                                                          "refresh_token": tokens.refresh_token})  # fmt: skip
    assert fresh.status_code == 200, fresh.text
    access = fresh.json()["access_token"]
    assert stat(server, access).status_code == 200
    # listed by `afi token clients`, revoked by `afi token revoke`
    listed = afi("token", "clients", db=Path(server.db))
    row = next(line.split("\t") for line in listed.stdout.splitlines() if url in line)
    assert row[1] == "A published agent" and row[2] == url and REDIRECT in row[5]
    assert afi("token", "revoke", row[0], db=Path(server.db)).returncode == 0
    assert stat(server, access).status_code == 401
    audit = AuditLog(open_database(server.db)).recent(limit=100)
    assert any(r["verb"] == "oauth.grant" and r["result"] == "ok" and url in r["path"] for r in audit)


def registrations(server: AfiServer) -> set[str]:
    """The client ids of clients that registered (RFC 7591), not those known by their document."""
    with open_database(server.db).read() as conn:
        rows = conn.execute("SELECT client_id, info FROM oauth_clients").fetchall()
    return {row[0] for row in rows if "client_id_metadata_document" not in json.loads(row[1])}


def test_a_raw_flow_with_a_document_and_a_registered_client_side_by_side(server: AfiServer, docs: HttpsServer) -> None:
    url = publish(docs, "/agents/raw.json")
    verifier, challenge = _pkce()
    params = {**authorize_params(url), "code_challenge": challenge, "resource": server.url + "/mcp"}
    with httpx.Client() as http:
        answer = approve(http, str(httpx.URL(server.url + "/oauth/authorize", params=params)), server.tokens["admin"])
    assert answer.status_code == 303, answer.text
    code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
    body = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": url,
            "code_verifier": verifier}  # fmt: skip
    token = httpx.post(server.url + "/oauth/token", data=body)
    assert token.status_code == 200, token.text
    assert stat(server, token.json()["access_token"]).status_code == 200
    # a registered client keeps working beside it
    assert stat(server, tokens_for(server)["access_token"]).status_code == 200


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _refusal_cases(docs: HttpsServer) -> list[tuple[str, str, str]]:
    """(client id, redirect URI, what the refusal must say), the documents served as each case needs."""
    base, port, good = docs.url, docs.url.rsplit(":", 1)[1], publish(docs, "/refusals/good.json")
    big = {"client_id": base + "/refusals/big.json", "redirect_uris": [REDIRECT], "client_name": "x" * 100_000}
    unbounded = {**big, "client_id": base + "/refusals/unbounded.json"}
    docs.routes.update({
        "/refusals/big.json": Reply(json.dumps(big).encode()),
        "/refusals/unbounded.json": Reply(json.dumps(unbounded).encode(), length=False),
        "/refusals/html.json": Reply(b"<html>hello</html>", headers={"Content-Type": "text/html"}),
        "/refusals/broken.json": Reply(b'{"client_id": ', headers=JSON),
        "/refusals/list.json": Reply(b"[]", headers=JSON),
        "/refusals/redirect.json": Reply(b"", 302, {"Location": good}),
        "/refusals/slow.json": Reply(b"{}", delay=30),
        "/refusals/missing.json": Reply(b"{}", 404),
        "/refusals/gzip.json": Reply(gzip.compress(b" " * 10_000_000 + b"{}"), headers={**JSON, **GZIP}),
    })  # fmt: skip
    publish(docs, "/refusals/mismatch.json", client_id=base + "/refusals/other.json")
    publish(docs, "/refusals/secret.json", token_endpoint_auth_method="client_secret_basic")
    publish(docs, "/refusals/no-uris.json", redirect_uris=[])
    publish(docs, "/refusals/js-uri.json", redirect_uris=["javascript:alert(1)"])
    publish(docs, "/refusals/implicit.json", grant_types=["implicit"])
    return [
        (base + "/refusals/mismatch.json", REDIRECT, "is not the URL it was fetched from"),
        (f"http://127.0.0.1:{port}/refusals/good.json", REDIRECT, "must be https"),
        (f"https://localhost:{port}/refusals/good.json", REDIRECT, "loopback address"),
        (f"https://[::ffff:127.0.0.1]:{port}/refusals/good.json", REDIRECT, "loopback address"),
        (f"https://[::1]:{port}/refusals/good.json", REDIRECT, "loopback address"),
        ("https://10.20.30.40/client.json", REDIRECT, "private address"),
        ("https://169.254.169.254/latest/meta-data", REDIRECT, "link-local address"),
        ("https://224.0.0.1/client.json", REDIRECT, "multicast address"),
        ("https://0.0.0.0/client.json", REDIRECT, "unspecified address"),
        ("https://100.64.1.1/client.json", REDIRECT, "non-public address"),
        ("https://[fe80::1]/client.json", REDIRECT, "link-local address"),
        ("https://[2002:7f00:1::1]/client.json", REDIRECT, "loopback address"),  # 6to4 of 127.0.0.1
        ("https://2130706433/client.json", REDIRECT, "loopback address"),  # 127.0.0.1 as one number
        (f"{base}/", REDIRECT, "must have a path"),
        (f"https://user:pw@127.0.0.1:{port}/refusals/good.json", REDIRECT, "user name or password"),
        (good + "#frag", REDIRECT, "fragment"),
        (f"{base}/refusals/../refusals/good.json", REDIRECT, "'..' path segments"),
        (good, "http://127.0.0.1:9/not-in-the-document", "not registered for client"),
        (base + "/refusals/big.json", REDIRECT, "over 16384 bytes"),
        (base + "/refusals/unbounded.json", REDIRECT, "over 16384 bytes"),
        (base + "/refusals/html.json", REDIRECT, "text/html, not application/json"),
        (base + "/refusals/broken.json", REDIRECT, "not valid JSON"),
        (base + "/refusals/list.json", REDIRECT, "must be a JSON object"),
        (base + "/refusals/redirect.json", REDIRECT, "redirects are not followed"),
        (base + "/refusals/missing.json", REDIRECT, "answered 404"),
        (base + "/refusals/gzip.json", REDIRECT, "came gzip-encoded; identity was asked"),
        (base + "/refusals/slow.json", REDIRECT, "did not arrive within 5 s"),
        (f"https://127.0.0.1:{_closed_port()}/client.json", REDIRECT, "could not be fetched"),
        (base + "/refusals/secret.json", REDIRECT, "public client"),
        (base + "/refusals/no-uris.json", REDIRECT, "must list its redirect_uris"),
        (base + "/refusals/js-uri.json", REDIRECT, "refused scheme"),
        (base + "/refusals/implicit.json", REDIRECT, "grant_types"),
    ]


def test_unusable_documents_are_clear_refusals_never_5xx(server: AfiServer, docs: HttpsServer) -> None:
    cases = _refusal_cases(docs)
    failures, tried = [], 0
    for client_id, redirect_uri, said in cases:
        answers = [httpx.get(server.url + "/oauth/authorize", params=authorize_params(client_id, redirect_uri),
                             timeout=30)]  # fmt: skip
        if redirect_uri == REDIRECT:  # the token endpoint refuses the same client as invalid_client
            body = {"grant_type": "authorization_code", "code": "x", "redirect_uri": REDIRECT, "client_id": client_id,
                    "code_verifier": "v" * 43}  # fmt: skip
            answers.append(httpx.post(server.url + "/oauth/token", data=body, timeout=30))
        for answer in answers:
            tried += 1
            error = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
            wanted = "invalid_client" if redirect_uri == REDIRECT else "invalid_request"
            if (
                answer.status_code not in (400, 401)
                or error.get("error") != wanted
                or said not in error.get("error_description", "")
            ):
                failures.append((client_id, answer.request.url.path, answer.status_code, answer.text[:200]))
    assert failures == [], f"{tried} requests ({len(cases)} documents), {len(failures)} failures: {failures}"
    assert docs.hits["/refusals/slow.json"] == 1  # a failure is cached: the token request did not wait again


def test_a_browser_gets_a_page_naming_the_problem(server: AfiServer, docs: HttpsServer) -> None:
    url = publish(docs, "/refusals/page.json", client_id=docs.url + "/someone-else.json")
    page = httpx.get(server.url + "/oauth/authorize", params=authorize_params(url), headers={"Accept": "text/html"})
    assert page.status_code == 400 and page.headers["content-type"].startswith("text/html")
    assert (
        "is not the URL it was fetched from" in page.text
        and "frame-ancestors 'none'" in page.headers["content-security-policy"]
    )


def test_documents_can_be_turned_off(tmp_path: Path, docs: HttpsServer) -> None:
    url = publish(docs, "/agents/off.json")
    with oauth_server(tmp_path, b"off\n", "--no-client-metadata") as off:
        meta = httpx.get(off.url + "/.well-known/oauth-authorization-server").json()
        assert meta["client_id_metadata_document_supported"] is False
        refused = httpx.get(off.url + "/oauth/authorize", params=authorize_params(url))
        assert refused.status_code == 400 and refused.json()["error"] == "invalid_client"
        assert "--no-client-metadata" in refused.json()["error_description"]
        revoked = httpx.post(off.url + "/oauth/revoke", data={"token": "x", "client_id": url})
        assert revoked.status_code == 401 and revoked.json()["error"] == "invalid_client"
    assert docs.hits["/agents/off.json"] == 0


def test_serve_refuses_bad_client_metadata_options(tmp_path: Path) -> None:
    cases = [
        (("--client-metadata-ca", str(tmp_path / "missing.pem")), "not a readable PEM file"),
        (("--client-metadata-allow-host", "https://x.example/"), "a host name or address, not a URL"),
        (("--no-client-metadata", "--client-metadata-allow-host", "x.example"), "no use with --no-client-metadata"),
    ]
    (tmp_path / "not-pem.pem").write_text("hello\n")
    cases.append((("--client-metadata-ca", str(tmp_path / "not-pem.pem")), "not a readable PEM file"))
    failures = []
    for args, said in cases:
        done = warm.run(
            [sys.executable, "-c", "from afi.cli import main; main()", "serve", "--port", "0",
             "--db", str(tmp_path / "afi.db"), "--root", str(tmp_path / "files"), *args],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if done.returncode != 2 or said not in " ".join(done.stderr.split()):
            failures.append((args, done.returncode, done.stderr[-300:]))
    assert failures == [], f"{len(cases)} option sets, {len(failures)} failures: {failures}"


def test_document_fetches_are_rate_limited_by_address(tmp_path: Path, docs: HttpsServer) -> None:
    """With ``--rate``, an address cannot make the server fetch documents faster than it may register."""
    paths = [f"/agents/rated-{i}.json" for i in range(8)]
    urls = [publish(docs, path) for path in paths]
    args = ("--rate", "0.2", "--burst", "3", "--client-metadata-allow-host", "127.0.0.1",
            "--client-metadata-ca", str(docs.ca_file))  # fmt: skip
    with oauth_server(tmp_path, b"rated\n", *args) as rated:
        answers = [httpx.get(rated.url + "/oauth/authorize", params=authorize_params(url)) for url in urls]
    statuses = [answer.status_code for answer in answers]
    assert statuses[:3] == [302] * 3 and set(statuses[3:]) == {429}, statuses
    assert sum(docs.hits[path] for path in paths) == 3


def test_one_fetch_per_document_and_a_bounded_number_at_once(docs: HttpsServer) -> None:
    """Twenty callers of one uncached document share one fetch; strangers naming 40 slow documents at once
    get at most MAX_FETCHES connections out, the rest a clear refusal (not a queue of held connections)."""
    import anyio

    from afi.auth.oauth.client_metadata import (
        MAX_FETCHES,
        ClientMetadataDocuments,
        ClientMetadataError,
        ClientMetadataPolicy,
    )

    url = docs.url + "/shared-once.json"
    body = json.dumps({"client_id": url, "client_name": "shared", "redirect_uris": [REDIRECT]}).encode()
    docs.routes["/shared-once.json"] = Reply(body, delay=0.5)
    slow = [f"/tarpit-{n}.json" for n in range(40)]
    for path in slow:
        docs.routes[path] = Reply(b"{}", delay=1.0)
    policy = ClientMetadataPolicy(allow_hosts=frozenset({"127.0.0.1"}), ca_file=str(docs.ca_file))
    documents = ClientMetadataDocuments(policy, ("afi:read", "afi:write"))
    outcomes: list[str] = []

    async def ask(target: str) -> None:
        try:
            outcomes.append((await documents.client(target)).client_name or "")
        except ClientMetadataError as err:
            outcomes.append(str(err))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(20):
                group.start_soon(ask, url)
        async with anyio.create_task_group() as group:
            for path in slow:
                group.start_soon(ask, docs.url + path)

    anyio.run(main)
    assert docs.hits["/shared-once.json"] == 1 and outcomes[:20] == ["shared"] * 20
    assert sum(docs.hits[path] for path in slow) == MAX_FETCHES
    assert sum("too many client metadata documents at once" in said for said in outcomes[20:]) == 40 - MAX_FETCHES
