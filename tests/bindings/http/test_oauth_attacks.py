"""Hostile clients against the built-in OAuth 2.1 authorization server of a real ``afi serve``.

Registration floods and oversized metadata, redirect URI schemes, PKCE of the wrong form, consent
forgeries, a code and a refresh token raced from two processes, wrong secrets and redirect URIs,
expired codes, revocation of unknown tokens, and absurd Authorization headers. No answer is a 500;
each test states its figures (cases tried, failures).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from afi.storage.database import open_database
from tests.support.servers import AfiServer, serve_store

from .test_oauth_flow import REDIRECT, _fields, _pkce, approve, oauth_server, register, stat, tokens_for


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    with oauth_server(tmp_path_factory.mktemp("oauthattack"), b"hello\n") as running:
        yield running


def test_registration_is_bounded(server: AfiServer) -> None:
    cases: list[tuple[dict[str, Any], set[int]]] = [
        ({"redirect_uris": [REDIRECT], "client_name": "x" * 1_000_000}, {400, 413}),
        ({"redirect_uris": [f"http://127.0.0.1/cb{i}" for i in range(10_000)]}, {400, 413}),
        ({"redirect_uris": [f"http://127.0.0.1/cb{i}" for i in range(11)]}, {400}),
        ({"redirect_uris": [REDIRECT], "client_name": "y" * 9000}, {400}),
        ({"redirect_uris": [REDIRECT], "client_name": "<script>alert(1)</script>"}, {201}),
        ({"redirect_uris": [f"http://127.0.0.1/cb{i}" for i in range(10)]}, {201}),
    ]
    uris = {"not a url": 400, "javascript:alert(1)": 400, "JavaScript:alert(1)": 400, "data:text/html,x": 400,
            "file:///etc/passwd": 400, "vbscript:x": 400, "blob:http://x/y": 400, "about:blank": 400,
            "http://evil.example/cb": 400, "http://localhost.evil.example/cb": 400, "http://127.0.0.1.nip.io/cb": 400,
            "https://ok.example/cb#f": 400, "https://ok.example/cb": 201, "http://127.0.0.1:8/cb": 201,
            "http://[::1]:8/cb": 201, "http://localhost:8/cb": 201, "com.example.app:/oauth": 201}  # fmt: skip
    cases += [({"redirect_uris": [uri]}, {status}) for uri, status in uris.items()]
    failures = []
    for body, wanted in cases:
        answer = httpx.post(server.url + "/oauth/register", content=json.dumps(body).encode(),
                            headers={"Content-Type": "application/json"}, timeout=60)  # fmt: skip
        if answer.status_code not in wanted or (answer.status_code != 201 and "error" not in answer.json()):
            failures.append((str(body)[:80], answer.status_code, answer.text[:120]))
    assert failures == [], f"{len(cases)} registrations, {len(failures)} failures: {failures}"
    with open_database(server.db).read() as conn:
        biggest = conn.execute("SELECT max(length(info)) FROM oauth_clients").fetchone()[0]
    assert biggest <= 8 * 1024, biggest


def test_registration_is_rate_limited_per_address(tmp_path: Path) -> None:
    with serve_store(tmp_path / "afi.db", tmp_path / "files", "--rate", "2", "--burst", "5") as limited:
        started = time.monotonic()
        answers = [httpx.post(limited.url + "/oauth/register", json={"redirect_uris": [REDIRECT]}) for _ in range(40)]
        spent = time.monotonic() - started
    statuses = [a.status_code for a in answers]
    # the bucket holds 5 and refills 2 a second: what the 40 requests' own time let in, on a slow machine too
    allowed = 5 + 2 * spent + 1
    assert set(statuses) <= {201, 429} and statuses.count(201) <= allowed, (
        f"40 registrations in {spent:.1f} s: {statuses}"
    )
    refused = next(a for a in answers if a.status_code == 429)
    assert refused.json()["error"]["code"] == "rate_limited" and "retry-after" in refused.headers


def _authorize(server: AfiServer, client: dict[str, Any], **extra: str) -> httpx.Response:
    _, challenge = _pkce()
    params = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT, "state": "s",
              "code_challenge": challenge, "code_challenge_method": "S256", **extra}  # fmt: skip
    return httpx.get(server.url + "/oauth/authorize", params={k: v for k, v in params.items() if v != "-"})


def test_the_authorize_endpoint_refuses_bad_requests(server: AfiServer) -> None:
    client = register(server.url)
    cases: list[tuple[dict[str, str], str]] = [
        ({"redirect_uri": "http://127.0.0.1:9/other"}, "400"),
        ({"redirect_uri": "http://evil.example/cb"}, "400"),
        ({"code_challenge": "-"}, "invalid_request"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"code_challenge": "short"}, "invalid_request"),
        ({"code_challenge": "A" * 42}, "invalid_request"),
        ({"code_challenge": "A" * 44}, "invalid_request"),
        ({"code_challenge": "A" * 128}, "invalid_request"),
        ({"code_challenge": "A" * 42 + "="}, "invalid_request"),
        ({"code_challenge": "A" * 42 + "/"}, "invalid_request"),
        ({"response_type": "token"}, "unsupported_response_type"),
        ({"scope": "afi:admin"}, "invalid_scope"),
        ({"resource": "https://elsewhere.example/mcp"}, "invalid_target"),
        ({"resource": "http://[::1"}, "invalid_target"),
        ({"resource": server.url + "/spaces/../mcp"}, "invalid_target"),
        ({"client_id": "nobody"}, "400"),
        ({"state": "-"}, "consent"),
        ({"state": "x" * 3000}, "consent"),
        ({"state": "<script>\"'&"}, "consent"),
    ]
    failures = []
    for extra, wanted in cases:
        answer = _authorize(server, client, **extra)
        said = answer.headers.get("location", "") + answer.text
        ok = (answer.status_code == 400) if wanted == "400" else (answer.status_code in (302, 400) and wanted in said)
        if wanted == "consent":
            ok = answer.status_code == 302 and "/oauth/consent?request=" in said
        if not ok:
            failures.append((extra, answer.status_code, said[:160]))
    assert failures == [], f"{len(cases)} requests, {len(failures)} failures: {failures}"


def _parked(server: AfiServer) -> tuple[httpx.Client, httpx.Response]:
    http = httpx.Client()
    parked = _authorize(server, register(server.url), resource=server.url + "/mcp")
    page = http.get(parked.headers["location"])
    assert page.status_code == 200
    return http, page


def test_consent_forgeries_are_refused(server: AfiServer) -> None:
    key = server.tokens["admin"]
    failures: list[tuple[Any, ...]] = []
    tried = 0
    forgeries: list[tuple[str, Any]] = [
        ("no cookie", lambda http, form: httpx.post(server.url + "/oauth/consent", data=form)),
        ("wrong cookie", lambda http, form: httpx.post(server.url + "/oauth/consent", data=form,
                                                        cookies={"afi_oauth_csrf": "forged"})),
        ("wrong form token", lambda http, form: http.post(server.url + "/oauth/consent", data={**form, "csrf": "x"})),
        ("foreign origin", lambda http, form: http.post(server.url + "/oauth/consent", data=form,
                                                         headers={"Origin": "https://evil.example"})),
        ("writer key", lambda http, form: http.post(server.url + "/oauth/consent",
                                                    data={**form, "key": server.tokens["writer"]})),
        ("other space's admin", lambda http, form: http.post(server.url + "/oauth/consent",
                                                             data={**form, "key": server.tokens["other-admin"]})),
        ("garbage key", lambda http, form: http.post(server.url + "/oauth/consent", data={**form, "key": "x" * 5000})),
    ]  # fmt: skip
    for name, forge in forgeries:
        http, page = _parked(server)
        try:
            form = {**_fields(page.text), "decision": "approve", "key": key}
            answer = forge(http, form)
            tried += 1
            if answer.status_code not in (401, 403) or "location" in answer.headers:
                failures.append((name, answer.status_code))
            # the genuine owner may still approve after a forgery was refused, but only once
            form = {**_fields(http.get(str(page.url)).text), "decision": "approve", "key": key}
            first = http.post(server.url + "/oauth/consent", data=form)
            replayed = http.post(server.url + "/oauth/consent", data=form)
            tried += 2
            if first.status_code != 303 or replayed.status_code != 400 or "location" in replayed.headers:
                failures.append((name + ", then the owner", first.status_code, replayed.status_code))
        finally:
            http.close()
    assert failures == [], f"{tried} posts, {len(failures)} failures: {failures}"


_RACE = """
import sys, time, httpx
url, at, body = sys.argv[1], float(sys.argv[2]), dict(a.split("=", 1) for a in sys.argv[3:])
time.sleep(max(0.0, at - time.time()))
answer = httpx.post(url, data=body, timeout=30)
print(answer.status_code, answer.text)
"""


def _race(server: AfiServer, body: dict[str, str], processes: int = 2) -> list[tuple[int, dict[str, Any]]]:
    """Post the same token request from several processes at the same instant."""
    at = time.time() + 1.5
    args = [f"{k}={v}" for k, v in body.items()]
    procs = [subprocess.Popen([sys.executable, "-c", _RACE, server.url + "/oauth/token", str(at), *args],
                              stdout=subprocess.PIPE, text=True) for _ in range(processes)]  # fmt: skip
    out = []
    for proc in procs:
        status, _, text = proc.communicate(timeout=60)[0].strip().partition(" ")
        out.append((int(status), json.loads(text)))
    return out


@pytest.mark.parametrize("kind", ["code", "refresh"])
def test_a_secret_raced_from_two_processes_gives_tokens_once(server: AfiServer, kind: str) -> None:
    rounds, failures = 3, list[Any]()
    for _ in range(rounds):
        client = register(server.url)
        got = tokens_for(server) if kind == "refresh" else None
        if got is not None:
            client = got["client"]
            body = {"grant_type": "refresh_token", "refresh_token": got["refresh_token"]}
        else:
            verifier, challenge = _pkce()
            params = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT,
                      "code_challenge": challenge, "state": "s"}  # fmt: skip
            with httpx.Client() as http:
                answer = approve(http, str(httpx.URL(server.url + "/oauth/authorize", params=params)),
                                 server.tokens["admin"])  # fmt: skip
            code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
            body = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                    "code_verifier": verifier}  # fmt: skip
        body |= {"client_id": client["client_id"], "client_secret": client["client_secret"]}
        answers = _race(server, body)
        statuses = sorted(status for status, _ in answers)
        winners = [answer for status, answer in answers if status == 200]
        if statuses != [200, 400] or any(a.get("error") != "invalid_grant" for s, a in answers if s != 200):
            failures.append(statuses)
            continue
        # the second use revoked the grant: the winner's tokens stop working too
        if stat(server, winners[0]["access_token"]).status_code != 401:
            failures.append("the winner's token still works")
    assert failures == [], f"{rounds} races of two processes, {len(failures)} failures: {failures}"


def test_the_token_endpoint_refuses_wrong_secrets_and_stale_codes(server: AfiServer) -> None:
    client = register(server.url)
    verifier, challenge = _pkce()
    params = {"response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT,
              "code_challenge": challenge, "state": "s"}  # fmt: skip
    with httpx.Client() as http:
        answer = approve(http, str(httpx.URL(server.url + "/oauth/authorize", params=params)), server.tokens["admin"])
    code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
    good = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier,
            "client_id": client["client_id"], "client_secret": client["client_secret"]}  # fmt: skip
    other = register(server.url)
    failures: list[tuple[Any, ...]] = []
    cases: list[tuple[dict[str, str], int, str | set[str]]] = [
        ({"client_secret": "wrong"}, 401, "invalid_client"),
        ({"client_secret": ""}, 401, "invalid_client"),
        ({"client_id": other["client_id"], "client_secret": other["client_secret"]}, 400, "invalid_grant"),
        ({"redirect_uri": "http://127.0.0.1:9/other"}, 400, "invalid_request"),
        ({"code_verifier": "x" * 43}, 400, "invalid_grant"),
        ({"code_verifier": "x" * 5000}, 400, {"invalid_request", "invalid_grant"}),
        ({"code": "afi_oac_" + "x" * 43}, 400, "invalid_grant"),
        ({"grant_type": "password"}, 400, {"unsupported_grant_type", "invalid_request"}),  # the SDK says the latter
        ({"grant_type": "client_credentials"}, 400, {"unsupported_grant_type", "invalid_request"}),
    ]
    for change, status, error in cases:
        answer = httpx.post(server.url + "/oauth/token", data={**good, **change})
        if answer.status_code != status or answer.json().get("error") not in (
            {error} if isinstance(error, str) else error
        ):
            failures.append(({k: v[:20] for k, v in change.items()}, answer.status_code, answer.text[:120]))
    # an expired code (its clock moved past 5 minutes) is refused, even with everything else right
    with open_database(server.db).transaction() as conn:
        conn.execute("UPDATE oauth_tokens SET expires_at = 0 WHERE kind = 'code' AND client_id = ?",
                     (client["client_id"],))  # fmt: skip
    expired = httpx.post(server.url + "/oauth/token", data=good)
    if expired.status_code != 400 or expired.json().get("error") != "invalid_grant":
        failures.append(("expired", expired.status_code, expired.text[:120]))
    assert failures == [], f"{len(cases) + 1} requests, {len(failures)} failures: {failures}"


def test_revocation_and_authorization_headers_never_fail_badly(server: AfiServer) -> None:
    client = register(server.url)
    auth = {"client_id": client["client_id"], "client_secret": client["client_secret"]}
    revocations = ["afi_oat_unknown", "afi_ort_unknown", "", "x" * 100_000, "\u00e9\u0000", "eyJ.eyJ.x"]
    failures = []
    for token in revocations:
        answer = httpx.post(server.url + "/oauth/revoke", data={"token": token, **auth})
        if answer.status_code not in (200, 400):  # RFC 7009 2.2: an unknown token is 200; no token at all, 400
            failures.append(("revoke", token[:20], answer.status_code))
    headers = ["Bearer " + "a" * 60_000, "Bearer", "Bearer ", "Basic Zm9vOmJhcg==", "Bearer a b c", "bearer afi_oat_x",
               "Bearer eyJ.eyJ.x", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.x", "Bearer afi_ort_" + "y" * 43, "Bearer \t",
               "Bearer afi_oac_" + "z" * 43, "BEARER " + "\u00ff" * 10, "Bearer " + "eyJ" * 20000 + ".a.b"]  # fmt: skip
    for header in headers:
        try:
            answer = httpx.get(server.url + "/afi/stat", params={"path": "/"},
                               headers=[(b"Authorization", header.encode("latin-1"))])  # fmt: skip
        except (httpx.RemoteProtocolError, httpx.LocalProtocolError):
            continue  # an HTTP parser refused the header line (ours or the server's): not a 500
        if answer.status_code not in (400, 401, 431) or "www-authenticate" not in answer.headers:
            failures.append(("authorization", header[:20], answer.status_code))
    assert failures == [], f"{len(revocations) + len(headers)} requests, {len(failures)} failures: {failures}"
