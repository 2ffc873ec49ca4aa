"""HttpClient against a real server gives what LocalClient gives on the same store."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from afi.clients import AfiClient, HttpClient, LocalClient, as_search_request
from afi.errors import Conflict, Forbidden, InvalidPath, NotFound, Unauthorized
from afi.model import RegexQuery, dump
from tests.support.servers import AfiServer


@pytest.fixture
def pair(afi_server: AfiServer) -> Iterator[tuple[HttpClient, LocalClient]]:
    from afi.auth.keys import KeyStore
    from afi.providers.memory.provider import MemoryProvider

    keys = KeyStore(afi_server.db)
    provider = MemoryProvider(afi_server.db, afi_server.root, keys=keys)
    caller = keys.verify(afi_server.tokens["writer"])
    assert caller is not None
    with HttpClient(afi_server.url, afi_server.tokens["writer"]) as http:
        yield http, LocalClient(provider, caller)


def test_both_clients_satisfy_the_protocol(pair: tuple[HttpClient, LocalClient]) -> None:
    http, local = pair
    assert isinstance(http, AfiClient) and isinstance(local, AfiClient)


def test_the_same_answers_through_http_and_in_process(pair: tuple[HttpClient, LocalClient]) -> None:
    http, local = pair
    folder = f"/files/parity-{secrets.token_hex(4)}"
    http.mkdir(folder)
    http.write(f"{folder}/a.txt", b"one\nparity two\n")
    local.write(f"{folder}/b.md", b"# b\nparity three\n")
    note = f"/facts/parity-{secrets.token_hex(4)}.md"
    http.write(note, b"Parity is checked across clients.\n")
    for client in (http, local):
        assert client.read(f"{folder}/b.md").data == b"# b\nparity three\n"
    assert http.stat(note) == local.stat(note)
    assert http.list(folder) == local.list(folder)
    assert http.read(note) == local.read(note)
    assert http.read(f"{folder}/a.txt", offset=4, length=6) == local.read(f"{folder}/a.txt", offset=4, length=6)
    assert http.search("parity", path=folder) == local.search("parity", path=folder)
    regex = RegexQuery(regex="PARITY", flags="i")
    assert http.search(regex, path=folder, **{"x-context": 1}) == local.search(regex, path=folder, **{"x-context": 1})
    assert http.delete(f"{folder}/a.txt") == local.delete(f"{folder}/b.md")
    assert http.list(folder) == local.list(folder)
    http.delete(folder)
    local.delete(note)


def test_errors_arrive_as_the_same_classes(pair: tuple[HttpClient, LocalClient], afi_server: AfiServer) -> None:
    http, local = pair
    folder = f"/files/errors-{secrets.token_hex(4)}"
    http.mkdir(folder)
    for client in (http, local):
        with pytest.raises(NotFound):
            client.stat("/files/never-there")
        with pytest.raises(InvalidPath):
            client.list("/", limit=0)
        with pytest.raises(Forbidden):
            client.write("/history/x.md", b"x")
        with pytest.raises(Conflict):
            client.mkdir(folder + "/.")
    with HttpClient(afi_server.url, afi_server.tokens["reader"]) as reader, pytest.raises(Forbidden) as caught:
        reader.write("/files/nope.txt", b"x")
    assert "afi:write" in caught.value.message
    with HttpClient(afi_server.url) as anonymous, pytest.raises(Unauthorized):
        anonymous.stat("/")


def test_etags_agree_between_read_stat_and_write(pair: tuple[HttpClient, LocalClient]) -> None:
    http, _ = pair
    path = f"/files/etag-{secrets.token_hex(4)}.txt"
    written = http.write(path, b"v1")
    assert http.stat(path).etag == written.etag == http.read(path).etag
    http.write(path, b"v2", if_match=written.etag)
    with pytest.raises(Conflict):
        http.write(path, b"v3", if_match=written.etag)


def test_a_search_request_is_built_from_a_query_and_options() -> None:
    request = as_search_request("x", path="/facts", limit=5, x_context=2)
    assert dump(request) == {"query": "x", "path": "/facts", "limit": 5, "x-context": 2}
    with pytest.raises(InvalidPath):
        as_search_request({"fuzzy": "x"})


def test_an_unreachable_server_is_internal() -> None:
    from afi.errors import Internal

    with HttpClient("http://127.0.0.1:9", timeout=2) as client, pytest.raises(Internal, match="cannot reach"):
        client.stat("/")
