"""The HTTP door's hostile requests: a deterministic corpus of raw HTTP/1.1 requests.

Hand lists plus a ``random.Random(SEED)`` drawing from ``tests/support/hostile.py`` (paths, JSON bodies,
integers, cursors) and from HTTP-only pieces here (request targets, methods, Range and conditional
headers, Content-Length, Authorization, Host, Origin). Each :class:`Case` is the bytes sent, so
nothing a client library would refuse to send is left out; :func:`corpus` is the same on every run.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from tests.support.hostile import (
    BAD_REGEXES,
    BOGUS_CURSORS,
    HOSTILE_INTS,
    WRONG_TYPES,
    hostile_path,
    hostile_text,
    malformed_json,
)

__all__ = ["FILE", "SEED", "Case", "corpus"]

SEED = 11
FILE = "/files/bait.txt"
GET_ROUTES = ["/afi/stat", "/afi/list", "/afi/read"]
JSON_ROUTES = ["/afi/mkdir", "/afi/move", "/afi/search", "/ledger/s1/append", "/ledger/s1/observe"]
JSON_ROUTES += ["/notes/remember", "/sync/apply", "/sync/ledger/apply", "/sync/state"]


@dataclass(frozen=True)
class Case:
    """One hostile request: a name to replay it by, and the bytes sent."""

    name: str
    raw: bytes


def _request(method: str, target: str | bytes, headers: dict[str, str] | None = None, body: bytes = b"") -> bytes:
    head = dict(headers or {})
    head.setdefault("Host", "127.0.0.1")
    if body or method in ("POST", "PUT"):
        head.setdefault("Content-Length", str(len(body)))
    if body and "Content-Type" not in head:
        head["Content-Type"] = "application/json"
    head["Connection"] = "close"
    line = (
        method.encode("latin-1") + b" " + (target if isinstance(target, bytes) else target.encode()) + b" HTTP/1.1\r\n"
    )
    fields = b"".join(f"{k}: {v}\r\n".encode("utf-8", "surrogateescape") for k, v in head.items())
    return line + fields + b"\r\n" + body


def _q(value: Any) -> str:
    return quote(str(value), safe="", errors="surrogatepass")


def _json(value: Any) -> bytes:
    return json.dumps(value).encode("ascii")  # ensure_ascii: a lone surrogate travels as "\ud800", as a client sends it


def _path_cases(rng: random.Random) -> Iterator[Case]:
    for i in range(260):
        path = hostile_path(rng)
        route = rng.choice(["/afi/stat", "/afi/list", "/afi/read", "delete", "write", "mkdir", "move", "search"])
        if route in GET_ROUTES:
            yield Case(f"path{i}:{route}", _request("GET", f"{route}?path={_q(path)}"))
        elif route == "delete":
            yield Case(f"path{i}:delete", _request("DELETE", f"/afi/delete?path={_q(path)}&recursive=true"))
        elif route == "write":
            yield Case(f"path{i}:write", _request("PUT", f"/afi/write?path={_q(path)}", body=b"x"))
        elif route == "mkdir":
            yield Case(f"path{i}:mkdir", _request("POST", "/afi/mkdir", body=_json({"path": path, "parents": True})))
        elif route == "move":
            pair = [FILE, path] if rng.random() < 0.5 else [path, "/files/moved.txt"]
            yield Case(f"path{i}:move", _request("POST", "/afi/move", body=_json({"from": pair[0], "to": pair[1]})))
        else:
            yield Case(f"path{i}:search", _request("POST", "/afi/search", body=_json({"query": "bait", "path": path})))
    for i, surrogate in enumerate(["\ud800", "\udfff", "a\ud83d", "\udc80\udc80"]):
        yield Case(f"surrogate{i}:mkdir", _request("POST", "/afi/mkdir", body=_json({"path": f"/files/{surrogate}"})))
        yield Case(
            f"surrogate{i}:move", _request("POST", "/afi/move", body=_json({"from": FILE, "to": f"/{surrogate}"}))
        )
        search = {"query": surrogate, "path": f"/files/{surrogate}"}
        yield Case(f"surrogate{i}:search", _request("POST", "/afi/search", body=_json(search)))
        yield Case(f"surrogate{i}:regex", _request("POST", "/afi/search", body=_json({"query": {"regex": surrogate}})))
        yield Case(
            f"surrogate{i}:semantic", _request("POST", "/afi/search", body=_json({"query": {"semantic": surrogate}}))
        )
        yield Case(f"surrogate{i}:glob", _request("GET", f"/afi/list?path=/files&glob={_q(surrogate)}"))


RAW_TARGETS = [
    b"/afi/../afi/stat?path=/",
    b"/afi/%2e%2e/afi/stat?path=/",
    b"/%2e%2e/%2e%2e/etc/passwd",
    b"/afi/stat%00?path=/",
    b"/afi/stat?path=%00",
    b"/afi/stat?path=/files/%c0%af%c0%af",
    b"/afi/stat?path=/files/%ed%a0%80",
    b"/afi/stat?path=/files/%ff%fe",
    b"/afi/stat?path=/files/%",
    b"/afi/stat?path=/files/%zz",
    b"/afi/stat?path=%2Ffiles%2F..%2F..%2Fetc",
    b"/afi/stat?path=/files/a&path=/files/b",
    b"/afi/stat?path",
    b"/afi/stat?=/",
    b"/afi/stat?&&&",
    b"/afi/stat?path=/;x",
    b"/afi/read?path=/files/bait.txt#frag",
    b"/afi/stat/?path=/",
    b"//afi//stat?path=/",
    b"/AFI/STAT?path=/",
    b"/afi/stat\xff?path=/",
    b"/afi/stat?path=/files/\xc3\xa9",
    b"/afi/stat?path=/files/a b",
    b"/afi/stat?path=/files/\t",
    b"*",
    b"http://evil.example/afi/stat?path=/",
    b"http://127.0.0.1/afi/stat?path=/",
    b"afi/stat?path=/",
    b"/spaces/../afi/stat?path=/",
    b"/spaces/%00/afi/stat?path=/",
    b"/spaces/" + b"a" * 300 + b"/afi/stat?path=/",
    b"/spaces/%ed%a0%80/afi/stat?path=/",
    b"/ledger/%00/append",
    b"/ledger/" + b"s" * 5000 + b"/append",
    b"/ledger/s1/nonsense",
    b"/ledger/s1/..%2f..%2fappend",
    b"/.afi/manifest.json/../../afi/stat?path=/",
    b"/.well-known/oauth-protected-resource/spaces/%ed%a0%80",
    b"/docs/../openapi.json",
    b"/" + b"a" * 10_000,
    b"/afi/list?path=/&limit=1&" + b"&".join(b"x%d=1" % n for n in range(2000)),
]


def _target_cases() -> Iterator[Case]:
    for i, target in enumerate(RAW_TARGETS):
        method = "POST" if target.startswith(b"/ledger") else "GET"
        yield Case(f"target{i}", _request(method, target, body=b"{}" if method == "POST" else b""))


def _body_cases(rng: random.Random) -> Iterator[Case]:
    for i, body in enumerate(malformed_json(rng)):
        yield Case(f"json{i}", _request("POST", rng.choice(JSON_ROUTES), body=body))
    fields: dict[str, dict[str, Any]] = {
        "/afi/mkdir": {"path": "/files/new", "parents": False},
        "/afi/move": {"from": FILE, "to": "/files/elsewhere.txt", "overwrite": False},
        "/afi/search": {"query": "bait", "path": "/", "limit": 5, "cursor": None, "x-context": 0, "x-budget": 100},
        "/ledger/s1/append": {"messages": [{"role": "user", "text": "hi", "entry_id": "e1"}]},
        "/notes/remember": {"notes": [{"kind": "fact", "content": "the bait is blue"}]},
        "/sync/apply": {
            "store": "a" * 32,
            "space": "default",
            "since": 0,
            "upto": 1,
            "more": False,
            "notes": [],
            "forgotten": [],
        },
    }
    for route, good in fields.items():
        for field in [*good, "unknown"]:
            for wrong in [*WRONG_TYPES, *HOSTILE_INTS, hostile_text(rng), {"a": {"b": [1] * 3}}]:
                yield Case(
                    f"type:{route}:{field}={wrong!r:.40}", _request("POST", route, body=_json({**good, field: wrong}))
                )
    for i, regex in enumerate(BAD_REGEXES):
        yield Case(
            f"regex{i}", _request("POST", "/afi/search", body=_json({"query": {"regex": regex}, "path": "/files"}))
        )
    queries: list[Any] = [{"semantic": ""}, {"semantic": "x" * 200_000}, {"regex": "a", "flags": "zz"}]
    queries += [{"regex": "a", "flags": 1}, {"conversation": None}, {"semantic": "x", "regex": "y"}, {"exact": "x"}]
    queries += [{"regex": "a", "semantic": "b", "conversation": "c"}, "x" * 100_000, "", ["a"], 1, None]
    for i, query in enumerate(queries):
        yield Case(f"query{i}", _request("POST", "/afi/search", body=_json({"query": query})))
    yield from _batch_cases(rng)
    deep = {"messages": [{"role": "user", "text": "x", "entry_id": "e", "timestamp": "not a time"}]}
    for i, op in enumerate(["append", "observe", "reflect", "scope.open", "scope.close", "bind", "nope", "..", "%00"]):
        bodies: list[dict[str, Any]] = [{}, deep, {"messages": "x"}, {"messages": [None]}, {"text": 5}, {"x": [[[]]]}]
        for j, payload in enumerate(bodies):
            yield Case(f"ledger{i}.{j}:{op}", _request("POST", f"/ledger/s1/{op}", body=_json(payload)))


def _batch_cases(rng: random.Random) -> Iterator[Case]:
    """Many-note remembers: each note's fields given wrong, and batches wrong as a whole."""
    good = {"kind": "fact", "content": "the bait is blue", "name": "bait"}
    note_fields = [*good, "id", "path", "block", "t_ref", "valid_from", "valid_to", "tags", "keywords", "links"]
    note_fields += ["supersedes", "importance", "consent", "context", "source_entry_ids", "reflection_id", "nope"]
    for field in note_fields:
        for wrong in [*WRONG_TYPES, *HOSTILE_INTS, hostile_text(rng), hostile_path(rng)]:
            body = _json({"notes": [good, {**good, "name": "second", field: wrong}]})
            yield Case(f"batch:{field}={wrong!r:.40}", _request("POST", "/notes/remember", body=body))
    batches: list[Any] = [[], [None], [[]], ["x"], [good] * 501, [{"kind": "fact", "content": "x" * 5_000_000}]]
    batches += [[{"kind": "working", "block": "b", "content": "x"}], [{"kind": "episode", "content": "x"}]]
    batches += [[{"kind": kind, "content": "x"} for kind in ("fact", "procedure", "file", "nope")]]
    batches += [[{**good, "id": "n1"}, {**good, "id": "n1", "content": "twice"}], "x", None, {"a": 1}]
    for i, notes in enumerate(batches):
        yield Case(f"batch{i}", _request("POST", "/notes/remember", body=_json({"notes": notes})))
    yield from _sync_cases(rng)


SYNC_STATE: dict[str, Any] = {
    "id": "0123456789ab", "kind": "fact", "name": "synced", "content": "from a peer", "ingested_at":
    "2026-01-01T00:00:00.000Z", "created_at": "2026-01-01T00:00:00.000Z", "updated_at": None, "token_count": 3,
    "t_ref": None, "valid_from": None, "valid_to": None, "supersedes": None, "links": [], "tags": [], "keywords": [],
    "context": None, "importance": None, "source_entry_ids": [], "path": None, "block": None, "promoted_from": None,
    "consent": None, "status": "active", "forgotten_at": None,
}  # fmt: skip


def _sync_cases(rng: random.Random) -> Iterator[Case]:
    """Sync batches from a peer: each field of a note's state given wrong, and batches wrong as a whole."""
    batch = {"store": "a" * 32, "space": "default", "since": 0, "upto": 1, "more": False, "forgotten": []}
    for field in [*SYNC_STATE, "nope"]:
        for wrong in [
            *WRONG_TYPES,
            *HOSTILE_INTS[:4],
            hostile_text(rng),
            hostile_path(rng),
            "2999-01-01T00:00:00.000Z",
        ]:
            body = _json({**batch, "notes": [{**SYNC_STATE, field: wrong}]})
            yield Case(f"sync:{field}={wrong!r:.40}", _request("POST", "/sync/apply", body=body))
    for field in batch:
        for wrong in [*WRONG_TYPES, *HOSTILE_INTS[:4], hostile_text(rng)]:
            body = _json({**batch, "notes": [], field: wrong})
            yield Case(f"sync:batch.{field}={wrong!r:.30}", _request("POST", "/sync/apply", body=body))
    yield from _sync_rest_cases(rng)
    for value in JUNK_NUMBERS:
        yield Case(f"sync:since={value!r:.20}", _request("GET", f"/sync/changes?peer=p&since={_q(value)}"))
        yield Case(
            f"sync:ledger.since={value!r:.20}", _request("GET", f"/sync/ledger/changes?peer=p&since={_q(value)}")
        )
    for peer in ["", "x" * 65, "%00", "%ff", "a&since=1"]:
        yield Case(f"sync:peer={peer!r:.20}", _request("GET", f"/sync/changes?peer={peer}"))
        yield Case(f"sync:received.peer={peer!r:.20}", _request("GET", f"/sync/received?peer={peer}"))


SYNC_ENTRY: dict[str, Any] = {
    "session": "s1", "session_created_at": "2026-01-01T00:00:00.000Z", "entry_id": "e1", "type": "message",
    "role": "user", "text": "from a peer", "timestamp": "2026-01-01T00:00:01.000Z", "ref": None, "data": {}, "clock": 1,
}  # fmt: skip
SYNC_SPACE_STATE: dict[str, Any] = {"store": "a" * 32, "space": "default", "version": 1, "blocks": {},
                                    "snapshots": [], "dropped": [], "folders": {}}  # fmt: skip


def _sync_rest_cases(rng: random.Random) -> Iterator[Case]:
    """A peer's ledger entries and its blocks and snapshots, each field given wrong."""
    batch = {"store": "a" * 32, "space": "default", "since": 0, "upto": 1, "more": False}
    wrongs = [*WRONG_TYPES, *HOSTILE_INTS[:4], hostile_text(rng), hostile_path(rng), "2999-01-01T00:00:00.000Z"]
    for field in [*SYNC_ENTRY, "nope"]:
        for wrong in wrongs:
            body = _json({**batch, "entries": [{**SYNC_ENTRY, field: wrong}]})
            yield Case(f"sync:ledger.{field}={wrong!r:.40}", _request("POST", "/sync/ledger/apply", body=body))
    block = {"content": "plan", "created_at": "2026-01-01T00:00:00.000Z", "updated_at": "2026-01-01T00:00:00.000Z"}
    snapshot = {"name": "s", "at": "2026-01-01T00:00:00.000Z", "created_at": "2026-01-01T00:00:00.000Z"}
    for field in [*block, "seen", "id", "nope"]:
        for wrong in wrongs:
            body = _json({**SYNC_SPACE_STATE, "blocks": {"plan": {**block, field: wrong}}})
            yield Case(f"sync:block.{field}={wrong!r:.40}", _request("POST", "/sync/state", body=body))
    for field in [*snapshot, "nope"]:
        for wrong in wrongs:
            body = _json({**SYNC_SPACE_STATE, "snapshots": [{**snapshot, field: wrong}]})
            yield Case(f"sync:snapshot.{field}={wrong!r:.40}", _request("POST", "/sync/state", body=body))
    for wrong in wrongs:
        for folders in (
            {hostile_path(rng): ["mkdir", "2026-01-01T00:00:00.000Z"]},
            {"docs": wrong},
            {"docs": [wrong, wrong]},
        ):
            body = _json({**SYNC_SPACE_STATE, "folders": folders})
            yield Case(f"sync:folders={str(folders)[:40]}", _request("POST", "/sync/state", body=body))
    for field in SYNC_SPACE_STATE:
        for wrong in [*WRONG_TYPES, *HOSTILE_INTS[:4], hostile_text(rng)]:
            body = _json({**SYNC_SPACE_STATE, field: wrong})
            yield Case(f"sync:state.{field}={wrong!r:.30}", _request("POST", "/sync/state", body=body))


JUNK_NUMBERS: list[Any] = [*HOSTILE_INTS, "abc", "", "1e3", "0x10", "1.5", "-0", "+5", " 7", "9" * 5000, "١٢", "NaN"]


def _query_cases(rng: random.Random) -> Iterator[Case]:
    for value in JUNK_NUMBERS:
        v = _q(value)
        yield Case(f"offset={value!r:.20}", _request("GET", f"/afi/read?path={FILE}&offset={v}"))
        yield Case(f"length={value!r:.20}", _request("GET", f"/afi/read?path={FILE}&length={v}"))
        yield Case(f"offset,length={value!r:.20}", _request("GET", f"/afi/read?path={FILE}&offset=1&length={v}"))
        yield Case(f"limit={value!r:.20}", _request("GET", f"/afi/list?path=/files&limit={v}"))
        yield Case(f"write.offset={value!r:.20}", _request("PUT", f"/afi/write?path={FILE}&offset={v}", body=b"x"))
        for flag in ("append", "create_only"):
            yield Case(f"{flag}={value!r:.20}", _request("PUT", f"/afi/write?path=/files/f.txt&{flag}={v}", body=b"x"))
        yield Case(f"recursive={value!r:.20}", _request("DELETE", f"/afi/delete?path=/files/none&recursive={v}"))
    for i, cursor in enumerate(BOGUS_CURSORS):
        yield Case(f"cursor{i}:list", _request("GET", f"/afi/list?path=/files&limit=1&cursor={_q(cursor)}"))
        yield Case(f"cursor{i}:facts", _request("GET", f"/afi/list?path=/facts&limit=1&cursor={_q(cursor)}"))
        body = _json({"query": "bait", "cursor": cursor})
        yield Case(f"cursor{i}:search", _request("POST", "/afi/search", body=body))
    globs = ["*" * 60_000, "[" * 1000, "[!", "[]", "[z-a]", "\\", "**/..", "%00", "?" * 5000, "a" * 50_001]
    for i, glob in enumerate(globs + [hostile_text(rng) for _ in range(12)]):
        for area in ("/files", "/facts", "/history"):
            yield Case(f"glob{i}:{area}", _request("GET", f"/afi/list?path={area}&glob={_q(glob)}"))
    for name in ("access_token", "token", "api_key"):
        yield Case(f"query-token:{name}", _request("GET", f"/afi/stat?path=/&{name}=afi_x"))


RANGES = ["bytes=0-0", "bytes=0-", "bytes=-1", "bytes=-0", "bytes=5-2", "bytes=999-", "bytes=26-", "bytes=0-99999"]
RANGES += ["bytes=", "bytes=-", "bytes=a-b", "bytes=0-1,2-3", "bytes=1-1,", "items=0-1", "bytes 0-1", "bytes=--1"]
RANGES += ["bytes=0-" + "9" * 5000, "bytes=" + "9" * 5000 + "-", "bytes=-" + "9" * 5000, "bytes=" + "1" * 30 + "-2"]
RANGES += ["bytes=0-18446744073709551616", "bytes=-18446744073709551616", "bytes=1e3-2e3", "bytes=\t0-1", ""]
ETAGS = ["*", '"x"', 'W/"x"', "x", '"', "W/", ",,,", '"a", "b"', "\x7f", "é", '"' + "a" * 10_000 + '"', "W/W/W/"]


def _header_cases(rng: random.Random) -> Iterator[Case]:
    for i, value in enumerate(RANGES + [f"bytes={rng.randrange(-5, 40)}-{rng.randrange(-5, 40)}" for _ in range(30)]):
        yield Case(f"range{i}:{value:.30}", _request("GET", f"/afi/read?path={FILE}", {"Range": value}))
        yield Case(f"range{i}:missing", _request("GET", "/afi/read?path=/files/none.txt", {"Range": value}))
    for i, tag in enumerate(ETAGS):
        yield Case(f"if-match{i}", _request("PUT", f"/afi/write?path={FILE}", {"If-Match": tag}, body=b"bait"))
        yield Case(f"if-none-match{i}", _request("GET", f"/afi/read?path={FILE}", {"If-None-Match": tag}))
    auth = ["Bearer", "Bearer ", "Bearer afi_x", "Basic dXNlcjpwYXNz", "bearer  afi_" + "x" * 10_000, "Token x", ""]
    auth += ["Bearer \x01", "Bearer é", "Bearer a b c", "Digest username=x", "Bearer " + "\x00" * 3]
    for i, value in enumerate(auth):
        yield Case(f"authorization{i}", _request("GET", "/afi/stat?path=/", {"Authorization": value}))
    lengths = ["-1", "abc", "1e3", "0x10", "5, 6", "99999999999999999999", "1 1", ""]
    for i, value in enumerate(lengths):
        yield Case(
            f"content-length{i}", _request("PUT", f"/afi/write?path={FILE}", {"Content-Length": value}, b"abcde")
        )
    yield Case(
        "content-length:twice",
        _request("PUT", f"/afi/write?path={FILE}", body=b"ab").replace(
            b"\r\n\r\n", b"\r\nContent-Length: 3\r\n\r\n", 1
        ),
    )
    yield Case("content-length:over-cap", _request("PUT", f"/afi/write?path={FILE}", {"Content-Length": str(2**40)}))
    yield Case(
        "chunked:bad",
        _request("PUT", f"/afi/write?path={FILE}", {"Transfer-Encoding": "chunked"}, b"zz\r\nx\r\n0\r\n\r\n"),
    )
    yield Case(
        "chunked+length",
        _request(
            "PUT", f"/afi/write?path={FILE}", {"Transfer-Encoding": "chunked", "Content-Length": "3"}, b"0\r\n\r\n"
        ),
    )
    yield Case("encoding:gzip", _request("PUT", f"/afi/write?path={FILE}", {"Transfer-Encoding": "gzip"}, b"x"))
    for size in (8_000, 20_000, 70_000, 300_000):
        yield Case(f"header:{size}", _request("GET", "/afi/stat?path=/", {"X-Big": "a" * size}))
        yield Case(
            f"headers:{size // 100}", _request("GET", "/afi/stat?path=/", {f"X-{n}": "a" for n in range(size // 100)})
        )
    hosts = ["evil.example", "", "127.0.0.1:99999", "[::1", "localhost\x00.evil", "a" * 5000, "127.0.0.1, evil.example"]
    for i, host in enumerate(hosts):
        yield Case(f"host{i}", _request("GET", "/afi/stat?path=/", {"Host": host}))
    origins = ["null", "https://evil.example", "http://localhost.evil.example", "file://", "http://127.0.0.1@evil", "x"]
    for i, origin in enumerate(origins):
        yield Case(f"origin{i}", _request("PUT", f"/afi/write?path={FILE}", {"Origin": origin}, b"bait"))
    for i, value in enumerate(["text/plain", "application/json; charset=latin-1", "multipart/form-data", "x/y/z", ""]):
        yield Case(
            f"content-type{i}", _request("POST", "/afi/mkdir", {"Content-Type": value}, _json({"path": "/files/ct"}))
        )
    yield Case(
        "header:bad-name",
        b"GET /afi/stat?path=/ HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Name: x\r\nConnection: close\r\n\r\n",
    )
    yield Case(
        "header:folded", b"GET /afi/stat?path=/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX: a\r\n b\r\nConnection: close\r\n\r\n"
    )
    yield Case("header:no-host", b"GET /afi/stat?path=/ HTTP/1.1\r\nConnection: close\r\n\r\n")
    yield Case("header:lf-only", b"GET /afi/stat?path=/ HTTP/1.1\nHost: 127.0.0.1\nConnection: close\n\n")
    yield Case(
        "header:nul", b"GET /afi/stat?path=/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX: a\x00b\r\nConnection: close\r\n\r\n"
    )


METHODS = ["PATCH", "TRACE", "CONNECT", "FOO", "get", "HEAD", "OPTIONS", "PROPFIND", "G\x01T", "GET GET", "M" * 300]


def _method_cases() -> Iterator[Case]:
    routes = ["/afi/stat?path=/", "/afi/write?path=/files/m.txt", "/afi/mkdir", "/mcp", "/", "/nowhere"]
    for method in METHODS:
        for route in routes:
            yield Case(f"method:{method:.10}:{route}", _request(method, route))
    preflight = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "PATCH"}
    yield Case("preflight:method", _request("OPTIONS", "/afi/stat?path=/", preflight))
    headers = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "GET"}
    yield Case(
        "preflight:header", _request("OPTIONS", "/afi/stat", {**headers, "Access-Control-Request-Headers": "X-Evil"})
    )
    yield Case("version:0.9", b"GET /afi/stat?path=/\r\n\r\n")
    yield Case("version:2", b"GET /afi/stat?path=/ HTTP/2.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    yield Case("version:junk", b"GET /afi/stat?path=/ HTTQ/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    yield Case("garbage", bytes(range(256)) + b"\r\n\r\n")
    yield Case("tls-hello", bytes.fromhex("16030100a5010000a10303") + b"\x00" * 64 + b"\r\n\r\n")


def corpus() -> list[Case]:
    """Every case, in a fixed order (the same on every run)."""
    rng = random.Random(SEED)
    cases = [*_path_cases(rng), *_target_cases(), *_body_cases(rng), *_query_cases(rng), *_header_cases(rng)]
    return cases + list(_method_cases())
