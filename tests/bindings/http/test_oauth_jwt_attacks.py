"""Hostile JWTs and hostile identity providers against ``afi serve --issuer``.

Headers that point elsewhere (``kid`` a URL, ``jku``, ``x5u``) make the server fetch nothing;
``nbf`` and ``iat`` in the future are refused, an audience list naming this server is accepted;
an issuer whose key set is garbage, or so slow it never answers in time, gets a 429 with a
Retry-After within the fetch timeout, never a 500 or a hang.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.servers import AfiServer, start_afi_serve

from .test_oauth_jwt import AUDIENCE, Issuer, issuer, read, server  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def spy() -> Iterator[dict[str, Any]]:
    """A server that counts every request: where a hostile header points."""
    seen: dict[str, Any] = {"hits": 0, "url": ""}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen["hits"] += 1
            self.send_error(404)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    seen["url"] = f"http://127.0.0.1:{httpd.server_address[1]}"
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield seen
    httpd.shutdown()
    httpd.server_close()


def test_hostile_headers_and_times(server: AfiServer, issuer: Issuer, spy: dict[str, Any]) -> None:  # noqa: F811
    import jwt

    now = int(time.time())
    stranger = rsa.generate_private_key(65537, 2048)
    signed = {"iss": issuer.url, "aud": AUDIENCE, "sub": "x", "exp": now + 600, "afi_space": "default",
              "scope": "afi:read"}  # fmt: skip
    cases: list[tuple[str, str, int]] = [
        ("kid is a URL", jwt.encode(signed, stranger, "RS256", headers={"kid": spy["url"] + "/key"}), 401),
        ("jku", jwt.encode(signed, stranger, "RS256", headers={"kid": "rsa9", "jku": spy["url"] + "/jwks"}), 401),
        ("x5u", jwt.encode(signed, stranger, "RS256", headers={"kid": "rsa9", "x5u": spy["url"] + "/cert"}), 401),
        (
            "jwk embedded",
            jwt.encode(
                signed,
                stranger,
                "RS256",
                headers={"kid": "rsa9", "jwk": json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(stranger.public_key()))},
            ),
            401,
        ),
        (
            "real kid, jku elsewhere",
            jwt.encode(signed, issuer.keys["rsa1"], "RS256", headers={"kid": "rsa1", "jku": spy["url"] + "/jwks"}),
            200,
        ),
        ("nbf in an hour", issuer.token(nbf=now + 3600), 401),
        ("iat in a day", issuer.token(iat=now + 86400), 401),
        ("aud a list naming us", issuer.token(aud=["https://other.example", AUDIENCE]), 200),
        ("aud a list without us", issuer.token(aud=["https://other.example"]), 401),
        ("kid huge", jwt.encode(signed, stranger, "RS256", headers={"kid": "k" * 20000}), 401),
        ("alg RS512", jwt.encode(signed, issuer.keys["rsa1"], "RS512", headers={"kid": "rsa1"}), 401),
        ("alg ES256 on an RSA kid", jwt.encode(signed, issuer.keys["ec1"], "ES256", headers={"kid": "rsa1"}), 401),
        ("crit header", jwt.encode(signed, issuer.keys["rsa1"], "RS256", headers={"kid": "rsa1", "crit": ["x"]}), 401),
    ]
    failures = []
    for name, token, status in cases:
        answer = read(server, token)
        if answer.status_code != status:
            failures.append((name, answer.status_code, answer.text[:120]))
    assert failures == [], f"{len(cases)} tokens, {len(failures)} failures: {failures}"
    assert spy["hits"] == 0, f"the server fetched {spy['hits']} URLs a token named"


def _idp(behaviour: str) -> tuple[ThreadingHTTPServer, str]:
    """An identity provider whose metadata is fine and whose key set is ``behaviour``."""
    box: dict[str, str] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/.well-known/oauth-authorization-server":
                data = json.dumps({"issuer": box["url"], "jwks_uri": box["url"] + "/jwks.json"}).encode()
            elif behaviour == "slow":
                time.sleep(30)
                data = b"{}"
            elif behaviour == "garbage":
                data = b"\x00\xffnot json at all" * 50
            elif behaviour == "not-a-set":
                data = b'{"keys": "nope"}'
            else:  # "metadata-garbage" never gets here
                data = b"[]"
            if behaviour == "metadata-garbage":
                data = b"[1, 2, 3]"
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the server gave up waiting: that is the point

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    box["url"] = f"http://127.0.0.1:{httpd.server_address[1]}"
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, box["url"]


@pytest.mark.parametrize("behaviour", ["garbage", "not-a-set", "slow", "metadata-garbage"])
def test_a_broken_issuer_is_429_not_500_nor_a_hang(tmp_path: Path, behaviour: str) -> None:
    import jwt

    httpd, url = _idp(behaviour)
    key = rsa.generate_private_key(65537, 2048)
    token = jwt.encode({"iss": url, "aud": AUDIENCE, "sub": "x", "exp": int(time.time()) + 600}, key, "RS256",
                       headers={"kid": "k1"})  # fmt: skip
    try:
        with start_afi_serve(tmp_path / "afi.db", tmp_path / "files", "--issuer", url, "--audience", AUDIENCE) as srv:
            timings, statuses = [], []
            for _ in range(3):
                started = time.monotonic()
                answer = httpx.get(srv.url + "/afi/stat", params={"path": "/"},
                                   headers={"Authorization": f"Bearer {token}"}, timeout=60)  # fmt: skip
                timings.append(round(time.monotonic() - started, 1))
                statuses.append(answer.status_code)
                assert answer.status_code in (401, 429), answer.text
                if answer.status_code == 429:
                    assert "retry-after" in answer.headers and answer.json()["error"]["code"] == "rate_limited"
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert max(timings) < 12, f"3 requests, statuses {statuses}, seconds {timings}"
