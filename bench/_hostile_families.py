"""The hostile families ``bench/hostile_cpu.py`` replays, and the meter that reads each request's server CPU.

A family is a function given a :class:`Target` (a keyless ``afi serve``, a meter on it, a scratch
folder, the size) that sends its requests through ``target.meter``; each request is recorded as a
:class:`Sent`: its family, its input, its status and the server's CPU (utime + stime of the server
process, read from ``/proc`` before and after). The inputs are the attack suites' own where a test
module holds them (the HTTP corpus, the render bombs, loose Origins, paths that are not UTF-8), so a
family grows with its suite.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tests.support.http_raw import exchange
from tests.support.servers import AfiServer

from ._common import process_cpu
from .folders import _make as make_folder
from .web_render import bombs as web_render_bombs

__all__ = ["FAMILIES", "Meter", "Sent", "Target"]

TIMEOUT = 600.0  # a request slower than this is recorded unanswered (status 0)
NEEDLE = "needle-29"
GB = 1_000_000_000


@dataclass(frozen=True)
class Sent:
    """One request: its family and input, method, status (0: no answer) and the server's CPU and wall time."""

    family: str
    input: str
    method: str
    status: int
    cpu_ms: float
    wall_ms: float


class Meter:
    """Given a running server and a log, send requests to it, appending a :class:`Sent` for each."""

    def __init__(self, server: AfiServer, log: list[Sent]) -> None:
        assert server.process is not None, "the server runs in a process of its own"
        self.pid = server.process.pid
        split = urlsplit(server.url)
        self.address = (split.hostname or "127.0.0.1", split.port or 80)
        self.http = httpx.Client(base_url=server.url, timeout=TIMEOUT)
        self.log = log

    def close(self) -> None:
        self.http.close()

    def _record(self, family: str, name: str, method: str, send: Callable[[], int]) -> int:
        cpu, started = process_cpu(self.pid), time.perf_counter()
        try:
            status = send()
        except (httpx.HTTPError, OSError):  # the server closed, or took past TIMEOUT
            status = 0
        wall = time.perf_counter() - started
        spent = (process_cpu(self.pid) - cpu) * 1000
        self.log.append(Sent(family, name, method, status, round(spent, 1), round(wall * 1000, 1)))
        return status

    def raw(self, family: str, name: str, data: bytes) -> int:
        """Send ``data`` as it is on a fresh connection; return the status (0 when none came)."""

        def send() -> int:
            answer = exchange(self.address, data, TIMEOUT)
            return 0 if answer is None else answer.status

        return self._record(family, name, data.split(b" ", 1)[0][:12].decode("latin-1"), send)

    def request(self, family: str, name: str, method: str, url: str, **kwargs: Any) -> httpx.Response | None:
        """Send one request through the kept-alive client; return its response (None when none came)."""
        got: list[httpx.Response] = []

        def send() -> int:
            got.append(self.http.request(method, url, **kwargs))
            return got[0].status_code

        self._record(family, name, method, send)
        return got[0] if got else None

    def pages(self, family: str, name: str, method: str, url: str, args: dict[str, Any]) -> int:
        """Follow a listing's or a search's ``next_cursor`` to its last page; return how many were sent."""
        cursor, sent = None, 0
        while True:
            sent += 1
            more: dict[str, str] = {"cursor": cursor} if cursor else {}
            where = {"params": {**args, **more}} if method == "GET" else {"json": {**args, **more}}
            answer = self.request(family, f"{name}, page {sent}", method, url, **where)
            if answer is None or answer.status_code != 200:
                return sent
            cursor = answer.json().get("next_cursor")
            if not cursor:
                return sent


@dataclass
class Target:
    """The keyless server the families attack, its meter, a scratch folder and the size of the run."""

    server: AfiServer
    meter: Meter
    scratch: Path
    quick: bool
    log: list[Sent] = field(default_factory=list)

    def put(self, path: str, data: bytes) -> None:
        """Write ``data`` at ``path`` unmeasured (a family's bait)."""
        self.meter.http.put("/afi/write", params={"path": path}, content=data).raise_for_status()


def _raw(method: str, target: bytes, body: bytes = b"", content_type: str = "") -> bytes:
    head = method.encode() + b" " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if content_type:
        head += f"Content-Type: {content_type}\r\n".encode()
    if body or method in ("POST", "PUT"):
        head += b"Content-Length: %d\r\n" % len(body)
    return head + b"\r\n" + body


def http_corpus(target: Target) -> None:
    """The HTTP door's hostile corpus (``tests/support/http_corpus.py``), raw bytes on fresh sockets."""
    from tests.support.http_corpus import FILE, corpus

    target.put(FILE, b"abcdefghijklmnopqrstuvwxyz")
    target.put("/facts/bait.md", b"a bait fact")
    for case in corpus():
        target.meter.raw("HTTP corpus", case.name, case.raw)


def not_utf8(target: Target) -> None:
    """Paths and bodies that are not UTF-8 at every route kind (``tests/bindings/http/test_http_not_utf8.py``)."""
    from tests.bindings.http.test_http_not_utf8 import SEED_FILE, cases

    target.put(SEED_FILE, b"seed")
    for name, method, route, body, content_type in cases():
        target.meter.raw("paths not UTF-8", name, _raw(method, route, body, content_type))


def loose_origins(target: Target) -> None:
    """Loose Origins and Hosts at every verb, the web page and ``/mcp`` (``test_http_origin_attacks.py``)."""
    from tests.bindings.http.test_http_origin_attacks import BAIT, loose_hosts, request, verbs
    from tests.bindings.http.test_http_origin_attacks import loose_origins as origins

    target.put(BAIT, b"a bait file")
    port = target.meter.address[1]
    own = ("Host", f"127.0.0.1:{port}")
    sets = [("Origin", [own, *(("Origin", value) for value in values)]) for values in origins(port)]
    sets += [("Host", [("Host", value) for value in values]) for values in loose_hosts(port)]
    for method, route, body in verbs():
        for kind, headers in sets:
            shown = " + ".join(value for name, value in headers if name == kind)
            target.meter.raw("loose Origins", f"{method} {route.split('?')[0]}, {kind} {shown}",
                             request(method, route, body, headers))  # fmt: skip


def cross_resource_tokens(target: Target) -> None:
    """OAuth tokens used outside the resource they were issued for (RFC 8707), on a server with keys."""
    from tests.bindings.http.test_oauth_flow import bearer, oauth_server, tokens_for

    (target.scratch / "oauth").mkdir()
    with oauth_server(target.scratch / "oauth", b"hello\n", process=True) as server:
        meter = Meter(server, target.log)
        try:
            issued = [("/spaces/other/mcp", "/spaces/other", "other-admin"), ("/mcp", "", "admin")]
            for resource, home, approver in issued:
                token = tokens_for(server, resource=server.url + resource, approver=approver)["access_token"]
                auth = bearer(token)
                for mount in ("", "/spaces/default", "/spaces/other"):
                    if mount == home:
                        continue
                    for verb, method, route, kwargs in _verbs(auth):
                        name = f"token for {resource} at {mount or '/'} {verb}"
                        meter.request("cross-resource tokens", name, method, mount + route, **kwargs)
        finally:
            meter.close()


def _verbs(auth: dict[str, str]) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    mcp = {"Accept": "application/json, text/event-stream", "X-Mcp-Stateless": "true"}
    yield "stat", "GET", "/afi/stat", {"params": {"path": "/files"}, "headers": auth}
    yield "list", "GET", "/afi/list", {"params": {"path": "/files"}, "headers": auth}
    yield "write", "PUT", "/afi/write", {"params": {"path": "/files/crossed.txt"}, "content": b"x", "headers": auth}
    yield "search", "POST", "/afi/search", {"json": {"query": "hello"}, "headers": auth}
    tools = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    yield "mcp", "POST", "/mcp", {"json": tools, "headers": {**auth, **mcp}}


def render_bombs(target: Target) -> None:
    """Markdown render bombs written to ``/files`` and browsed: the web bench's and the web test's."""
    from tests.bindings.web.test_web_render_bombs import BOMBS, TAIL

    texts = dict(web_render_bombs(0.1 if target.quick else 1.0))
    texts |= {f"test {name}": bomb + TAIL for name, bomb in BOMBS.items()}
    for name, text in texts.items():
        path = "/files/render-" + name.replace(" ", "-") + ".md"
        target.meter.request("render bombs", f"{name}: write", "PUT", "/afi/write", params={"path": path},
                             content=text.encode())  # fmt: skip
        target.meter.request("render bombs", f"{name}: /ui/browse", "GET", "/ui/browse", params={"path": path})


def front_matter(quick: bool) -> dict[str, str]:
    """Front-matter bombs, by name: nesting (flow and block), a huge ``context`` and body, billion laughs
    (the sizes of ``context`` and body a tenth with ``quick``)."""
    scale = 10 if quick else 1
    out = {}
    for depth in (200, 500, 2000, 20_000):
        out[f"flow {depth:,} deep"] = "---\na: " + "[" * depth + "]" * depth + "\n---\nbody\n"
        out[f"block sequence {depth:,} deep"] = "---\na:\n  " + "- " * depth + "x\n---\nbody\n"
    for depth in (200, 500, 2000):  # a mapping's key a line each, one more space each: 2,000 deep is 2 MB
        out[f"block mapping {depth:,} deep"] = "---\n" + "".join(" " * n + f"k{n}:\n" for n in range(depth))
        out[f"block mapping {depth:,} deep"] += " " * depth + "x\n---\nbody\n"
    out[f"context of {7_000_000 // scale:,} characters"] = (
        "---\ncontext: " + "x" * (7_000_000 // scale) + "\n---\nbody\n"
    )
    out[f"body of {50_000_000 // scale:,} characters"] = "---\ntitle: big\n---\n" + "x" * (50_000_000 // scale) + "\n"
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]  # 9^9 strings by reference
    out["billion laughs"] = "---\n" + "\n".join(lines) + "\n---\nbody\n"
    return out


def front_matter_bombs(target: Target) -> None:
    """Each front-matter bomb written to ``/facts`` with ``PUT /afi/write``; read and browsed when stored."""
    for i, (name, text) in enumerate(front_matter(target.quick).items()):
        path = f"/facts/bomb-{i}.md"
        meter = target.meter
        answer = meter.request("front matter", name, "PUT", "/afi/write", params={"path": path}, content=text.encode())
        if answer is not None and answer.status_code == 200:
            meter.request("front matter", f"{name}: read", "GET", "/afi/read", params={"path": path})
            meter.request("front matter", f"{name}: /ui/browse", "GET", "/ui/browse", params={"path": path})


def sparse_writes(target: Target) -> None:
    """A 1-byte write at offset 1e9 to each of ten files, then that byte read back."""
    for i in range(10):
        path = f"/files/sparse-{i}.bin"
        target.meter.request("sparse writes", f"{path} at offset 1e9", "PUT", "/afi/write",
                             params={"path": path, "offset": GB}, content=b"x")  # fmt: skip
        target.meter.request("sparse writes", f"{path}: read its last byte", "GET", "/afi/read",
                             params={"path": path}, headers={"Range": f"bytes={GB}-"})  # fmt: skip


def big_file(target: Target) -> None:
    """A sparse file (300 MB; 30 MB quick) with the needle at its end, put on disk, then searched exact
    and regex page by page, browsed, and its end read."""
    size = 30_000_000 if target.quick else 300_000_000
    huge = target.server.root / "default" / "huge" / "sparse.bin"
    huge.parent.mkdir(parents=True)
    tail = f"the {NEEDLE} at the end\n".encode().ljust(100, b".")
    with huge.open("wb") as out:
        out.truncate(size - len(tail))
        out.seek(size - len(tail))
        out.write(tail)
    meter, label = target.meter, f"{size // 1_000_000} MB sparse file"
    for mode, query in (("exact", NEEDLE), ("regex", {"regex": "needle-2[0-9]"})):
        meter.pages(
            "big file", f"{label}: {mode} search", "POST", "/afi/search", {"query": query, "path": "/files/huge"}
        )
    meter.request("big file", f"{label}: /ui/browse", "GET", "/ui/browse", params={"path": "/files/huge/sparse.bin"})
    meter.request("big file", f"{label}: read its last 100 bytes", "GET", "/afi/read",
                  params={"path": "/files/huge/sparse.bin"}, headers={"Range": "bytes=-100"})  # fmt: skip


def big_folder(target: Target) -> None:
    """A folder of 100,000 files (5,000 quick) put on disk: every list page at limit 1000, the web page
    of it, every page of an exact search over it."""
    n = 5000 if target.quick else 100_000
    make_folder(target.server.root / "default" / "big", n)
    time.sleep(2.2)  # a folder filled a while ago, as the was
    meter, label = target.meter, f"{n:,} files"
    meter.pages("big folder", f"{label}: list", "GET", "/afi/list", {"path": "/files/big", "limit": 1000})
    meter.request("big folder", f"{label}: /ui/browse", "GET", "/ui/browse", params={"path": "/files/big"})
    search = {"query": "line 4242", "path": "/files/big", "limit": 10}
    meter.pages("big folder", f"{label}: exact search", "POST", "/afi/search", search)


# In this order: the corpus first, on a store holding only its bait (as its test runs it).
FAMILIES: tuple[tuple[str, Callable[[Target], None]], ...] = (
    ("HTTP corpus", http_corpus),
    ("paths not UTF-8", not_utf8),
    ("loose Origins", loose_origins),
    ("cross-resource tokens", cross_resource_tokens),
    ("render bombs", render_bombs),
    ("front matter", front_matter_bombs),
    ("sparse writes", sparse_writes),
    ("big file", big_file),
    ("big folder", big_folder),
)
