"""The built-in OAuth 2.1 authorization server of ``afi serve``, against a real server.

The MCP SDK's own OAuth client (``OAuthClientProvider``) discovers, registers, sends the owner to the
consent page (the test plays the owner and posts the form with an admin key) and calls ``afi.read``;
then the refusal matrix, refresh rotation, revocation and resource binding, over raw HTTP.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re
import secrets
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from afi.auth.audit import AuditLog
from afi.auth.keys import KeyStore
from afi.storage.database import open_database
from tests.support import warm
from tests.support.mcp import run
from tests.support.servers import AfiServer, serve_store

REDIRECT = "http://127.0.0.1:9/callback"


@contextlib.contextmanager
def oauth_server(
    base: Path, hello: bytes, *args: str, db: str | None = None, process: bool = False
) -> Iterator[AfiServer]:
    """``afi serve`` (with ``args``; with ``process``, in a process of its own) on a new store (``db``,
    else a SQLite file in ``base``) with an admin, a writer and another space's admin key (by those
    names in ``tokens``), and ``/files/hello.txt`` holding ``hello``."""
    store: Path | str = db if db is not None else base / "afi.db"
    root = base / "files"
    keys = KeyStore(store)
    tokens = {
        "admin": keys.create(space="default", scopes=("afi:admin",), name="admin")[1],
        "writer": keys.create(space="default", scopes=("afi:write",), name="writer")[1],
        "other-admin": keys.create(space="other", scopes=("afi:admin",), name="other admin")[1],
    }
    keys.close()
    (root / "default").mkdir(parents=True)
    with serve_store(store, root, *args, process=process) as running:
        running.tokens = tokens
        httpx.put(running.url + "/afi/write", params={"path": "/files/hello.txt"}, content=hello,
                  headers=bearer(tokens["writer"])).raise_for_status()  # fmt: skip
        yield running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    with oauth_server(tmp_path_factory.mktemp("oauth"), b"hello oauth\n") as running:
        yield running


def _fields(html: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', html))


def approve(http: httpx.Client, authorize_url: str, key: str | None, *, decision: str = "approve") -> httpx.Response:
    """Play the owner: follow /oauth/authorize to the consent page and post its form."""
    parked = http.get(authorize_url)
    assert parked.status_code == 302, parked.text
    page = http.get(parked.headers["location"])
    assert page.status_code == 200, page.text
    assert "script" not in page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    form = {**_fields(page.text), "decision": decision, **({"key": key} if key is not None else {})}
    return http.post(str(page.url.copy_with(query=None)), data=form)


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def register(url: str, name: str = "raw client") -> dict[str, Any]:
    answer = httpx.post(url + "/oauth/register", json={"redirect_uris": [REDIRECT], "client_name": name})
    assert answer.status_code == 201, answer.text
    return answer.json()  # type: ignore[no-any-return]


def tokens_for(
    server: AfiServer, *, resource: str | None = None, scope: str = "afi:read afi:write", approver: str = "admin"
) -> dict[str, Any]:
    """Register, get the owner's approval and exchange the code: the token response, with the client."""
    client = register(server.url)
    verifier, challenge = _pkce()
    params = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT, "state": "s1",
              "code_challenge": challenge, "code_challenge_method": "S256", "scope": scope,
              "resource": resource or server.url + "/mcp"}  # fmt: skip
    with httpx.Client() as http:
        answer = approve(http, str(httpx.URL(server.url + "/oauth/authorize", params=params)), server.tokens[approver])
    assert answer.status_code == 303, answer.text
    sent = parse_qs(urlsplit(answer.headers["location"]).query)
    assert sent["state"] == ["s1"] and sent["iss"] == [server.url]
    body = {"grant_type": "authorization_code", "code": sent["code"][0], "redirect_uri": REDIRECT,
            "client_id": client["client_id"], "client_secret": client["client_secret"],
            "code_verifier": verifier}  # fmt: skip
    token = httpx.post(server.url + "/oauth/token", data=body)
    assert token.status_code == 200, token.text
    return {**token.json(), "client": client, "code": sent["code"][0], "verifier": verifier}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def stat(server: AfiServer, token: str, path: str = "/afi/stat") -> httpx.Response:
    return httpx.get(server.url + path, params={"path": "/files/hello.txt"}, headers=bearer(token))


# -- the whole flow, as an MCP client does it --------------------------------------------------


class _Storage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def test_the_mcp_sdk_client_registers_gets_consent_and_reads(server: AfiServer) -> None:
    _sdk_flow(server)


def test_the_same_flow_on_postgresql(tmp_path: Path, pg_store_url: str) -> None:
    """The grants, codes and tokens live in the store: on PostgreSQL as on SQLite."""
    with oauth_server(tmp_path, b"hello oauth\n", db=pg_store_url) as running:
        _sdk_flow(running)


def sdk_read(
    server: AfiServer,
    client_name: str,
    owner: Callable[[httpx.Client, str], httpx.Response],
    *,
    client_metadata_url: str | None = None,
) -> tuple[str, _Storage]:
    """Read /files/hello.txt through MCP with the SDK's OAuth client (registering, or naming its
    metadata document); ``owner(browser, authorize_url)`` plays the owner and returns the consent's
    answer. Return what was read and the client's storage (its tokens and client)."""
    answered: list[AuthorizationCodeResult] = []

    async def redirect_handler(url: str) -> None:
        with httpx.Client() as http:  # the owner's browser
            answer = owner(http, url)
        assert answer.status_code == 303, answer.text
        sent = parse_qs(urlsplit(answer.headers["location"]).query)
        answered.append(AuthorizationCodeResult(code=sent["code"][0], state=sent["state"][0], iss=sent["iss"][0]))

    async def callback_handler() -> AuthorizationCodeResult:
        return answered[-1]

    storage = _Storage()

    async def body() -> str:
        metadata = OAuthClientMetadata(redirect_uris=[REDIRECT], client_name=client_name)  # type: ignore[list-item]
        auth = OAuthClientProvider(server.url + "/mcp", metadata, storage, redirect_handler, callback_handler,
                                   client_metadata_url=client_metadata_url)  # fmt: skip
        async with (
            create_mcp_http_client(auth=auth) as http,
            Client(streamable_http_client(server.url + "/mcp", http_client=http), cache=None) as client,
        ):
            result = await client.call_tool("afi.read", {"path": "/files/hello.txt"})
            assert not result.is_error, result.content
            return result.content[0].text  # type: ignore[union-attr]

    return run(body), storage


def _sdk_flow(server: AfiServer) -> None:
    read, storage = sdk_read(server, "An agent far away", lambda http, url: approve(http, url, server.tokens["admin"]))
    assert read == "hello oauth\n"
    assert storage.tokens is not None and storage.tokens.access_token.startswith("afi_oat_")
    # the same principal over plain HTTP, with the grant's space and scopes
    assert stat(server, storage.tokens.access_token).status_code == 200
    rows = AuditLog(open_database(server.db)).recent(limit=50)
    assert any(r["verb"] == "oauth.grant" and r["result"] == "ok" and r["principal"].startswith("key_") for r in rows)
    listed = warm.run(
        [sys.executable, "-c", "from afi.cli import main; main()", "token", "clients", "--db", str(server.db)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "An agent far away" in listed.stdout and REDIRECT in listed.stdout


# -- the authorization server's protocol ---------------------------------------------------------


def test_metadata_names_the_built_in_server(server: AfiServer) -> None:
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        assert httpx.get(server.url + path).json()["authorization_servers"] == [server.url]
    meta = httpx.get(server.url + "/.well-known/oauth-authorization-server").json()
    assert meta["issuer"] == server.url
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["registration_endpoint"] == server.url + "/oauth/register"


def test_nothing_is_granted_without_the_owner(server: AfiServer) -> None:
    client = register(server.url)
    _, challenge = _pkce()
    params = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT,
              "code_challenge": challenge, "state": "x", "resource": server.url + "/mcp"}  # fmt: skip
    url = str(httpx.URL(server.url + "/oauth/authorize", params=params))
    with httpx.Client() as http:
        assert approve(http, url, None).status_code == 401  # no key
    with httpx.Client() as http:
        assert approve(http, url, server.tokens["writer"]).status_code == 403  # not an admin key
    with httpx.Client() as http:
        assert approve(http, url, server.tokens["other-admin"]).status_code == 403  # another space's admin
    with httpx.Client() as http:
        denied = approve(http, url, None, decision="deny")
    assert denied.status_code == 303 and "error=access_denied" in denied.headers["location"]
    rows = AuditLog(open_database(server.db)).recent(limit=50)
    results = {r["result"] for r in rows if r["verb"] == "oauth.grant" and client["client_id"] in r["path"]}
    assert results >= {"unauthorized", "forbidden", "denied"}


def test_the_consent_form_needs_its_csrf_cookie(server: AfiServer) -> None:
    client = register(server.url)
    _, challenge = _pkce()
    params = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT,
              "code_challenge": challenge, "resource": server.url + "/mcp"}  # fmt: skip
    with httpx.Client() as http:
        parked = http.get(str(httpx.URL(server.url + "/oauth/authorize", params=params)))
        page = http.get(parked.headers["location"])
    form = {**_fields(page.text), "decision": "approve", "key": server.tokens["admin"]}
    forged = httpx.post(server.url + "/oauth/consent", data=form)  # another site's post: no SameSite cookie
    assert forged.status_code == 403 and "location" not in forged.headers


def test_pkce_plain_and_bad_verifiers_are_refused(server: AfiServer) -> None:
    client = register(server.url)
    params = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT,
              "code_challenge": "x" * 43, "code_challenge_method": "plain"}  # fmt: skip
    refused = httpx.get(server.url + "/oauth/authorize", params=params)
    said = refused.headers.get("location", "") + refused.text
    assert refused.status_code in (302, 400) and "invalid_request" in said
    got = tokens_for(server)
    replay = {"grant_type": "authorization_code", "code": got["code"], "redirect_uri": REDIRECT,
              "client_id": got["client"]["client_id"], "client_secret": got["client"]["client_secret"],
              "code_verifier": got["verifier"]}  # fmt: skip
    assert httpx.post(server.url + "/oauth/token", data=replay).json()["error"] == "invalid_grant"
    # the replayed code revoked its grant: the tokens it gave stop working
    assert stat(server, got["access_token"]).status_code == 401


def test_refresh_rotates_and_an_old_refresh_token_is_refused(server: AfiServer) -> None:
    got = tokens_for(server)
    client = got["client"]
    body = {"grant_type": "refresh_token", "refresh_token": got["refresh_token"], "client_id": client["client_id"],
            "client_secret": client["client_secret"]}  # fmt: skip
    fresh = httpx.post(server.url + "/oauth/token", data=body)
    assert fresh.status_code == 200, fresh.text
    new = fresh.json()
    assert new["refresh_token"] != got["refresh_token"] and new["access_token"] != got["access_token"]
    assert stat(server, new["access_token"]).status_code == 200
    again = httpx.post(server.url + "/oauth/token", data=body)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    # a rotated refresh token that comes back was stolen: the grant is revoked
    refused = stat(server, new["access_token"])
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]


def test_revocation_ends_the_grant(server: AfiServer) -> None:
    got = tokens_for(server)
    assert stat(server, got["access_token"]).status_code == 200
    client = got["client"]
    revoked = httpx.post(server.url + "/oauth/revoke", data={"token": got["access_token"],
                         "client_id": client["client_id"], "client_secret": client["client_secret"]})  # fmt: skip
    assert revoked.status_code == 200
    refused = stat(server, got["access_token"])
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert "revoked" in refused.json()["error"]["message"]


def test_the_cli_revokes_a_grant(server: AfiServer) -> None:
    got = tokens_for(server)
    principal = httpx.get(server.url + "/afi/stat", params={"path": "/"}, headers=bearer(got["access_token"]))
    assert principal.status_code == 200
    grants = [g for g in _grants(server.db) if g[0].startswith("grant_")]
    newest = grants[-1][0]
    cli = [sys.executable, "-c", "from afi.cli import main; main()", "token", "revoke", newest, "--db", str(server.db)]
    assert warm.run(cli, capture_output=True, text=True).returncode == 0
    assert stat(server, got["access_token"]).status_code == 401


def _grants(db: Path | str) -> list[tuple[str, ...]]:
    from afi.auth.oauth.store import OAuthStore

    return [(g.id, g.client_id) for g in OAuthStore(open_database(db)).grants()]


def test_a_token_is_bound_to_its_resource(server: AfiServer) -> None:
    spaced = tokens_for(server, resource=server.url + "/spaces/other/mcp", scope="afi:read", approver="other-admin")
    assert spaced["scope"] == "afi:read"
    # bound to the space 'other': refused under /spaces/default, served under /spaces/other
    refused = stat(server, spaced["access_token"], "/spaces/default/afi/stat")
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert stat(server, spaced["access_token"], "/spaces/other/afi/stat").status_code in (200, 404)
    # another server on the same store: the token names this one's host and port, so it is refused there
    with serve_store(server.db, server.root) as twin:
        other = httpx.get(twin.url + "/afi/stat", params={"path": "/"}, headers=bearer(spaced["access_token"]))
    assert other.status_code == 401 and "another server" in other.json()["error"]["message"]
    # a resource on another server is refused at /authorize
    client = register(server.url)
    _, challenge = _pkce()
    params = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT,
              "code_challenge": challenge, "resource": "https://elsewhere.example/mcp"}  # fmt: skip
    answer = httpx.get(server.url + "/oauth/authorize", params=params)
    assert answer.status_code == 302 and "error=invalid_target" in answer.headers["location"]


@pytest.mark.parametrize(
    "token", ["afi_oat_" + "x" * 43, "afi_ort_" + "y" * 43, "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0."]
)
def test_unknown_tokens_are_401_invalid_token(server: AfiServer, token: str) -> None:
    refused = stat(server, token)
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]


def test_a_redirect_uri_with_a_dangerous_scheme_is_not_registered(server: AfiServer) -> None:
    for uri in ("javascript:alert(1)", "http://evil.example/cb", "data:text/html,x"):
        answer = httpx.post(server.url + "/oauth/register", json={"redirect_uris": [uri]})
        assert answer.status_code == 400, uri


def test_a_mount_takes_an_oauth_token_as_its_caller(server: AfiServer, tmp_path: Path) -> None:
    from afi.app.mount import prepare_mount

    got = tokens_for(server, scope="afi:read")
    prepared = prepare_mount(tmp_path, server.db, server.root, got["access_token"], ro=True, subtree="/", timeout=5)
    assert prepared.caller.principal.startswith("grant_") and prepared.caller.scopes == frozenset({"afi:read"})
    assert prepared.caller.space == "default"


def test_a_real_mount_with_an_oauth_token_reads_and_refuses_writes(server: AfiServer, tmp_path: Path) -> None:
    """`afi mount --token FILE` with an OAuth access token: a real FUSE mount, the grant's principal."""
    import os

    from tests.support.cli import afi
    from tests.support.fuse import afi_mount

    got = tokens_for(server, scope="afi:read")
    grant = KeyStore(server.db).authenticate(got["access_token"]).principal
    assert grant.startswith("grant_")
    token_file = tmp_path / "oauth.token"
    token_file.write_text(got["access_token"] + "\n")
    token_file.chmod(0o600)
    with afi_mount(tmp_path / "mnt", server.db, server.root, "--token", str(token_file)) as mount:
        facts = Path(mount.path) / "facts"
        assert facts.is_dir() and isinstance(os.listdir(facts), list)
        with pytest.raises(OSError):  # afi:read only: the mount refuses the write
            (facts / "from-oauth.md").write_text("a grant for reading cannot write\n")
    revoked = afi("token", "revoke", grant, db=server.db)
    assert revoked.returncode == 0, revoked.stderr
    mounting = afi_mount(tmp_path / "mnt2", server.db, server.root, "--token", str(token_file), timeout=20)
    revoked_refusal = "unauthorized: the access token is unknown or was revoked"
    with pytest.raises(RuntimeError, match=revoked_refusal), mounting:  # a revoked grant no longer mounts
        pass
