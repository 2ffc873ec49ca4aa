"""Registered clients' secrets are kept only as SHA-256 digests, against a real ``afi serve``.

The store's bytes never hold a secret a registration handed out; the token and revocation endpoints
refuse a wrong secret and take the right one (in the form body and as HTTP Basic); a client record
an older version wrote with its secret in plain text still authenticates, and no plaintext survives
the server's start or that record's first use.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from afi.auth.keys import KeyStore
from afi.storage.database import open_database
from tests.support.servers import AfiServer, serve_store

from .test_oauth_flow import REDIRECT, _pkce, approve

_LEGACY_AT_START = "legacy-at-start"


def _legacy_client(db: Path, client_id: str) -> str:
    """Write a client record the way older versions did: its secret in plain text. Return the secret."""
    secret = secrets.token_hex(32)
    info = {"client_id": client_id, "client_secret": secret, "redirect_uris": [REDIRECT], "client_name": client_id,
            "token_endpoint_auth_method": "client_secret_post", "scope": "afi:read afi:write",
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"]}  # fmt: skip
    with open_database(db).transaction() as conn:
        conn.execute(
            "INSERT INTO oauth_clients (client_id, info, created_at) VALUES (?, ?, ?)",
            (client_id, json.dumps(info, sort_keys=True), datetime.now(UTC).isoformat()),
        )
    return secret


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    base = tmp_path_factory.mktemp("oauthsecrets")
    db, root = base / "afi.db", base / "files"
    keys = KeyStore(db)
    admin = keys.create(space="default", scopes=("afi:admin",), name="admin")[1]
    keys.close()
    (root / "default").mkdir(parents=True)
    legacy = _legacy_client(db, _LEGACY_AT_START)
    with serve_store(db, root) as running:
        running.tokens = {"admin": admin, _LEGACY_AT_START: legacy}
        yield running


def store_bytes(db: Path | str) -> bytes:
    """Every byte of the SQLite store as it is on disk (its write-ahead log too)."""
    return b"".join(p.read_bytes() for p in Path(db).parent.glob(Path(db).name + "*") if p.is_file())


def _code(server: AfiServer, client_id: str) -> tuple[str, str]:
    verifier, challenge = _pkce()
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "state": "s",
              "code_challenge": challenge, "resource": server.url + "/mcp"}  # fmt: skip
    with httpx.Client() as http:
        answer = approve(http, str(httpx.URL(server.url + "/oauth/authorize", params=params)), server.tokens["admin"])
    assert answer.status_code == 303, answer.text
    return parse_qs(urlsplit(answer.headers["location"]).query)["code"][0], verifier


def _exchange(server: AfiServer, client_id: str, code: str, verifier: str, **auth: Any) -> httpx.Response:
    body = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id,
            "code_verifier": verifier, **auth.get("form", {})}  # fmt: skip
    return httpx.post(server.url + "/oauth/token", data=body, headers=auth.get("headers", {}))


def _basic(client_id: str, secret: str, scheme: str = "Basic") -> dict[str, str]:
    return {"Authorization": f"{scheme} " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


@pytest.mark.parametrize("method", ["client_secret_post", "client_secret_basic"])
def test_a_secret_is_kept_hashed_and_checked(server: AfiServer, method: str) -> None:
    registered = httpx.post(server.url + "/oauth/register", json={"redirect_uris": [REDIRECT], "client_name": method,
                                                                  "token_endpoint_auth_method": method})  # fmt: skip
    assert registered.status_code == 201, registered.text
    client_id, secret = registered.json()["client_id"], registered.json()["client_secret"]
    assert len(secret) >= 32
    kept = store_bytes(server.db)
    assert client_id.encode() in kept and secret.encode() not in kept  # the record is there, its secret is not
    info = kept_info(server.db, client_id)
    assert "client_secret" not in info and len(info["client_secret_sha256"]) == 64

    def auth(sent: str, scheme: str = "Basic") -> dict[str, Any]:
        return (
            {"headers": _basic(client_id, sent, scheme)}
            if method == "client_secret_basic"
            else {"form": {"client_secret": sent}}
        )

    code, verifier = _code(server, client_id)
    wrong = [secret[:-1] + ("0" if secret[-1] != "0" else "1"), "", info["client_secret_sha256"], secret.upper()]
    refusals = [_exchange(server, client_id, code, verifier, **auth(sent)) for sent in wrong]
    assert [r.status_code for r in refusals] == [401] * len(wrong), [r.text for r in refusals]
    assert all(r.json()["error"] == "invalid_client" for r in refusals)
    # the code survived the refusals; a scheme's name is case-insensitive (RFC 9110)
    accepted = _exchange(server, client_id, code, verifier, **auth(secret, scheme="basic"))
    assert accepted.status_code == 200, accepted.text
    token = accepted.json()["access_token"]
    revoke = {"grant_type": "-", "token": token}
    refused = _exchange(server, client_id, "-", "-", **auth("nope")).status_code  # the same check at /oauth/token
    assert refused == 401
    # (the SDK's revocation handler wants client_secret in the form even with HTTP Basic: post only)
    for sent, wanted in (("nope", 401), (secret, 200)) if method == "client_secret_post" else ():
        answer = httpx.post(
            server.url + "/oauth/revoke", data={**revoke, "client_id": client_id, "client_secret": sent}
        )
        assert answer.status_code == wanted, answer.text
    assert secret.encode() not in store_bytes(server.db)


def kept_info(db: Path | str, client_id: str) -> dict[str, Any]:
    with open_database(db).read() as conn:
        row = conn.execute("SELECT info FROM oauth_clients WHERE client_id = ?", (client_id,)).fetchone()
    return json.loads(row[0])  # type: ignore[no-any-return]


def test_a_plaintext_record_of_an_older_version_is_hashed_at_start_and_still_works(server: AfiServer) -> None:
    secret = server.tokens[_LEGACY_AT_START]
    info = kept_info(server.db, _LEGACY_AT_START)  # hashed when the server started
    assert "client_secret" not in info and secret not in json.dumps(info) and "client_secret_sha256" in info
    code, verifier = _code(server, _LEGACY_AT_START)
    wrong = _exchange(server, _LEGACY_AT_START, code, verifier, form={"client_secret": "0" * 64})
    assert wrong.status_code == 401
    right = _exchange(server, _LEGACY_AT_START, code, verifier, form={"client_secret": secret})
    assert right.status_code == 200, right.text


def test_a_plaintext_record_written_while_serving_works_and_is_hashed_on_use(server: AfiServer) -> None:
    secret = _legacy_client(Path(server.db), "legacy-while-serving")
    assert kept_info(server.db, "legacy-while-serving")["client_secret"] == secret
    code, verifier = _code(server, "legacy-while-serving")
    assert (
        _exchange(server, "legacy-while-serving", code, verifier, form={"client_secret": "f" * 64}).status_code == 401
    )
    right = _exchange(server, "legacy-while-serving", code, verifier, form={"client_secret": secret})
    assert right.status_code == 200, right.text
    info = kept_info(server.db, "legacy-while-serving")
    assert "client_secret" not in info and "client_secret_sha256" in info
