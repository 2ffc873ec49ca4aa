"""``afi serve --issuer URL --audience A``: JWT access tokens of an identity provider the test runs itself
(its metadata and JWKS on a tiny HTTP server in a thread), over HTTP and MCP, with the refusal matrix."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from afi.auth.keys import KeyStore
from tests.support.mcp import run, sdk
from tests.support.servers import AfiServer, start_afi_serve
from tests.support.tls import serving

AUDIENCE = "https://memory.example/api"


@dataclass
class Issuer:
    """A tiny identity provider: RFC 8414 metadata and a JWKS whose keys the test can rotate."""

    url: str = ""
    keys: dict[str, Any] = field(default_factory=dict)  # kid -> private key
    fetches: int = 0

    def jwks(self) -> dict[str, Any]:
        out = []
        for kid, key in self.keys.items():
            algo = RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else ECAlgorithm
            jwk = json.loads(algo.to_jwk(key.public_key()))
            out.append({**jwk, "kid": kid, "use": "sig"})
        return {"keys": out}

    def token(self, kid: str = "rsa1", alg: str = "RS256", **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": AUDIENCE, "sub": "agent-7", "exp": now + 600, "iat": now,
                "scope": "afi:read afi:write", "afi_space": "default", **claims}  # fmt: skip
        return jwt.encode({k: v for k, v in body.items() if v is not None}, self.keys[kid], alg, headers={"kid": kid})


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    idp = Issuer(keys={"rsa1": rsa.generate_private_key(65537, 2048), "ec1": ec.generate_private_key(ec.SECP256R1())})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/.well-known/oauth-authorization-server":
                body: dict[str, Any] = {"issuer": idp.url, "jwks_uri": idp.url + "/jwks.json",
                                        "authorization_endpoint": idp.url + "/authorize"}  # fmt: skip
            elif self.path == "/jwks.json":
                idp.fetches += 1
                body = idp.jwks()
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    idp.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    with serving(httpd):
        yield idp


@pytest.fixture(scope="module")
def server(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    base = tmp_path_factory.mktemp("jwt")
    db, root = base / "afi.db", base / "files"
    keys = KeyStore(db)
    writer = keys.create(space="default", scopes=("afi:write",))[1]
    keys.close()
    args = ("--issuer", issuer.url, "--audience", AUDIENCE, "--space-claim", "afi_space")
    with start_afi_serve(db, root, *args) as running:
        running.tokens = {"writer": writer}
        headers = {"Authorization": f"Bearer {writer}"}
        httpx.put(running.url + "/afi/write", params={"path": "/files/jwt.txt"}, content=b"from the idp\n",
                  headers=headers).raise_for_status()  # fmt: skip
        yield running


def read(server: AfiServer, token: str, prefix: str = "") -> httpx.Response:
    return httpx.get(server.url + prefix + "/afi/read", params={"path": "/files/jwt.txt"},
                     headers={"Authorization": f"Bearer {token}"})  # fmt: skip


def test_metadata_names_the_issuer(server: AfiServer, issuer: Issuer) -> None:
    for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
        assert httpx.get(server.url + path).json()["authorization_servers"] == [issuer.url]
    assert httpx.get(server.url + "/.well-known/oauth-authorization-server").status_code == 404


@pytest.mark.parametrize("kid,alg", [("rsa1", "RS256"), ("ec1", "ES256")])
def test_the_issuers_tokens_work_over_http_and_mcp(server: AfiServer, issuer: Issuer, kid: str, alg: str) -> None:
    token = issuer.token(kid, alg)
    assert read(server, token).text == "from the idp\n"

    async def body() -> str:
        async with sdk(server.url + "/mcp", token) as client:
            result = await client.call_tool("afi.read", {"path": "/files/jwt.txt"})
            assert not result.is_error, result.content
            return result.content[0].text  # type: ignore[union-attr]

    assert run(body) == "from the idp\n"
    assert read(server, server.tokens["writer"]).status_code == 200  # API keys keep working beside them


def test_scopes_and_space_come_from_the_claims(server: AfiServer, issuer: Issuer) -> None:
    reader = issuer.token(scope="afi:read")
    put = httpx.put(server.url + "/afi/write", params={"path": "/files/no.txt"}, content=b"x",
                    headers={"Authorization": f"Bearer {reader}"})  # fmt: skip
    assert put.status_code == 403
    other = issuer.token(afi_space="other")
    refused = read(server, other, "/spaces/default")
    assert refused.status_code == 401 and 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert read(server, issuer.token(afi_space="../x")).status_code == 401


def _tampered(token: str) -> str:
    head, payload, sig = token.split(".")
    claims = json.loads(jwt.utils.base64url_decode(payload))
    claims["scope"] = "afi:admin"
    return ".".join([head, jwt.utils.base64url_encode(json.dumps(claims).encode()).decode(), sig])


def _none(issuer: Issuer) -> str:
    head = jwt.utils.base64url_encode(json.dumps({"alg": "none", "kid": "rsa1"}).encode()).decode()
    body = {"iss": issuer.url, "aud": AUDIENCE, "sub": "x", "exp": int(time.time()) + 600, "scope": "afi:read"}
    return f"{head}.{jwt.utils.base64url_encode(json.dumps(body).encode()).decode()}."


def _hmac_with_public_key(issuer: Issuer) -> str:
    pem, spki = serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    public = issuer.keys["rsa1"].public_key().public_bytes(pem, spki)
    body = {"iss": issuer.url, "aud": AUDIENCE, "sub": "x", "exp": int(time.time()) + 600, "scope": "afi:read"}
    header = {"alg": "HS256", "kid": "rsa1", "typ": "JWT"}
    signing = ".".join(
        jwt.utils.base64url_encode(json.dumps(part).encode()).decode() for part in (header, body)
    ).encode()
    signature = jwt.utils.base64url_encode(hmac.new(public, signing, hashlib.sha256).digest()).decode()
    return f"{signing.decode()}.{signature}"


@pytest.mark.parametrize(
    "make,said",
    [
        (lambda i: i.token(exp=int(time.time()) - 3600), "expired"),
        (lambda i: i.token(aud="https://another.example"), "audience"),
        (lambda i: i.token(iss="https://another-issuer.example"), "issuer"),
        (lambda i: _tampered(i.token()), "refused"),
        (_none, "algorithm"),
        (_hmac_with_public_key, "algorithm"),
        (lambda i: i.token(exp=None), "exp"),
    ],
    ids=["expired", "wrong-audience", "wrong-issuer", "tampered", "alg-none", "hs256-public-key", "no-exp"],
)
def test_the_refusal_matrix(server: AfiServer, issuer: Issuer, make: Any, said: str) -> None:
    refused = read(server, make(issuer))
    assert refused.status_code == 401, refused.text
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert said in refused.json()["error"]["message"]


def test_a_rotated_key_is_fetched_again(server: AfiServer, issuer: Issuer) -> None:
    assert read(server, issuer.token()).status_code == 200
    before = issuer.fetches
    issuer.keys["rsa2"] = rsa.generate_private_key(65537, 2048)
    time.sleep(2.1)  # past the cooldown between two fetches of the set
    assert read(server, issuer.token("rsa2")).status_code == 200
    assert issuer.fetches == before + 1
    unknown = rsa.generate_private_key(65537, 2048)
    forged = jwt.encode({"iss": issuer.url, "aud": AUDIENCE, "exp": int(time.time()) + 60}, unknown, "RS256",
                        headers={"kid": "rsa3"})  # fmt: skip
    assert read(server, forged).status_code == 401
