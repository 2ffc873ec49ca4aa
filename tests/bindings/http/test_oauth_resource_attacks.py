"""Cross-resource tokens (RFC 8707): an OAuth access token works only at the resource it was issued for.

A resource is a mount point of this server with its MCP endpoint: the root (``…/mcp``, or the base
URL) or one space's (``…/spaces/<space>/mcp``, or ``…/spaces/<space>``). A token issued for one is
good at that mount point's ``/mcp`` and its ``/afi/*`` API, nowhere else: a token for
``/spaces/other/mcp`` used at ``/mcp`` or ``/afi/*`` (where it would act in ``other`` all the same)
is 401 ``invalid_token``. Every token below goes to every verb at every mount point: the mismatches
are all refused (accepted: zero) and the matches all served.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.bindings.http.test_oauth_flow import bearer, oauth_server, tokens_for
from tests.support.servers import AfiServer

MOUNTS = ["", "/spaces/default", "/spaces/other", "/spaces/third"]
MCP_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "X-Mcp-Stateless": "true"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    with oauth_server(tmp_path_factory.mktemp("oauth-resources"), b"hello\n") as running:
        for space in ("other", "third"):
            put = httpx.put(
                running.url + f"/spaces/{space}/afi/write",
                params={"path": "/files/hello.txt"},
                content=b"hello " + space.encode(),
                headers=bearer(running.tokens["other-admin"] if space == "other" else running.tokens["admin"]),
            )
            assert put.status_code in (200, 401), put.text  # 'third' has no key of its own: never served
        yield running


def _send(server: AfiServer, token: str, mount: str, verb: str) -> httpx.Response:
    """One request of ``verb`` under ``mount`` with ``token``."""
    url, auth = server.url + mount, bearer(token)
    if verb == "stat":
        return httpx.get(url + "/afi/stat", params={"path": "/files"}, headers=auth)
    if verb == "list":
        return httpx.get(url + "/afi/list", params={"path": "/files"}, headers=auth)
    if verb == "write":
        return httpx.put(url + "/afi/write", params={"path": "/files/crossed.txt"}, content=b"x", headers=auth)
    if verb == "delete":
        return httpx.delete(url + "/afi/delete", params={"path": "/files/crossed.txt"}, headers=auth)
    if verb == "search":
        return httpx.post(url + "/afi/search", json={"query": "hello"}, headers=auth)
    return httpx.post(url + "/mcp", json=MCP_LIST, headers={**auth, **MCP_HEADERS})


def test_a_token_works_only_at_the_resource_it_was_issued_for(server: AfiServer) -> None:
    base = server.url
    issued = {  # resource -> (the mount point it names, the approving key)
        base + "/mcp": ("", "admin"),
        base: ("", "admin"),
        base + "/spaces/default/mcp": ("/spaces/default", "admin"),
        base + "/spaces/other/mcp": ("/spaces/other", "other-admin"),
        base + "/spaces/other": ("/spaces/other", "other-admin"),
    }
    verbs = ["stat", "list", "write", "delete", "search", "mcp"]
    tried, accepted, refused_otherwise, served, matching = 0, [], [], 0, 0
    for resource, (home, approver) in issued.items():
        token = tokens_for(server, resource=resource, approver=approver)["access_token"]
        for mount in MOUNTS:
            for verb in verbs:
                answer = _send(server, token, mount, verb)
                if mount == home:
                    matching += 1
                    served += answer.status_code == 200
                    continue
                tried += 1
                if answer.status_code < 400:
                    accepted.append(f"{resource} at {mount or '/'} {verb}: {answer.status_code}")
                elif answer.status_code != 401 or 'error="invalid_token"' not in answer.headers["www-authenticate"]:
                    refused_otherwise.append(f"{resource} at {mount or '/'} {verb}: {answer.status_code}")
    summary = f"cross-resource tokens: {tried} cases tried, {len(accepted)} accepted"
    print(summary)
    assert not accepted, summary + ":\n" + "\n".join(accepted)
    assert not refused_otherwise, "refused, but not 401 invalid_token:\n" + "\n".join(refused_otherwise)
    assert served == matching, f"{matching - served} of {matching} requests at the token's own resource failed"


def test_the_refusal_names_where_the_token_is_good(server: AfiServer) -> None:
    token = tokens_for(server, resource=server.url + "/spaces/other/mcp", approver="other-admin")["access_token"]
    refused = httpx.get(server.url + "/afi/stat", params={"path": "/"}, headers=bearer(token))
    assert refused.status_code == 401
    message = refused.json()["error"]["message"]
    assert "/spaces/other/mcp" in message and "/spaces/other/afi/" in message, message
    mcp = httpx.post(server.url + "/mcp", json=MCP_LIST, headers={**bearer(token), **MCP_HEADERS})
    assert mcp.status_code == 401 and json.loads(mcp.text)["error"]["data"]["code"] == "unauthorized"
