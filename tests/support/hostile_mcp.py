"""The MCP door's hostile corpus (issue 11): tool calls with hostile arguments, and raw JSON-RPC.

:func:`tool_cases` gives (tool, arguments) pairs for the official client to send: a hand list, then
calls generated from a seed. :func:`envelopes` gives JSON-RPC bodies no client would send, and
:func:`raw_http_cases` wraps them (and hostile headers, methods and URLs) as HTTP requests for ``/mcp``.
The values come from :mod:`tests.support.hostile`; ``tests/bindings/mcp/test_mcp_attacks.py`` sends them and
judges the answers.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from tests.support.hostile import (
    BAD_REGEXES,
    BOGUS_CURSORS,
    HOSTILE_INTS,
    LONE_SURROGATES,
    WRONG_TYPES,
    hostile_path,
    hostile_text,
    malformed_json,
)

__all__ = ["INIT", "INITIALIZED", "PROTOCOL", "STAT", "Raw", "envelopes", "json_bytes", "raw_http_cases", "tool_cases"]

FILE_TOOLS = ["afi.stat", "afi.list", "afi.read", "afi.search", "afi.write", "afi.mkdir", "afi.delete", "afi.move"]
TOOLS = [*FILE_TOOLS, "afi.manifest", "memory.view", "memory.read", "memory.insert", "memory.recall", "memory.forget"]
GLOBS = ["[", "[!", "[]", "*" * 3000, "**/**", "[a-", "\\", "[[:alpha:]]", "?" * 300, "*.md\x00"]
TIMES = ["", "x", "now", "2024-13-45T99:99:99Z", "9999-12-31T23:59:59Z", "0000-01-01", "-1", "1e9"]
TIMES += ["2024-01-01T00:00:00+25:00", "2024-01-01T00:00:00.123456789123Z", "10000-01-01T00:00:00Z", "9" * 400]
KINDS = [[], [""], ["fact"], ["bogus"], ["fact", "fact"], ["episode", "working", "procedure", "file"], ["\x00"], [1]]


def _query(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.25:
        return hostile_text(rng)
    if roll < 0.6:
        query: dict[str, Any] = {"regex": rng.choice(BAD_REGEXES) if rng.random() < 0.7 else hostile_text(rng)}
        if rng.random() < 0.7:
            query["flags"] = rng.choice(["", "i", "imsu", "g", "x", "ii", "\x00", "I", "y" * 500])
        return query
    if roll < 0.8:
        semantic: dict[str, Any] = {"semantic": hostile_text(rng)}
        if rng.random() < 0.5:
            semantic["threshold"] = rng.choice([-1, 2, 1e308, -1e308, 0, 0.5])
        return semantic
    if roll < 0.95:
        return {
            "conversation": hostile_text(rng),
            "session": rng.choice([hostile_text(rng), "../../x", "", "s1"]),
            "page_limit": rng.choice([1, 100]),
        }
    return rng.choice([{}, {"regex": 1}, {"semantic": None}, {"regex": "a", "semantic": "b"}, ["a"], 5])


def _value(rng: random.Random, tool: str, prop: str) -> Any:
    if rng.random() < 0.12:
        return rng.choice(WRONG_TYPES)
    if prop in ("path", "from", "to"):
        path = hostile_path(rng)
        return path.lstrip("/") if tool.startswith("memory.") and rng.random() < 0.6 else path
    if prop in ("limit", "offset", "length", "x-context", "x-budget", "top_k", "budget"):
        return rng.choice(HOSTILE_INTS)
    if prop == "cursor":
        return rng.choice(BOGUS_CURSORS)
    if prop == "glob":
        return rng.choice(GLOBS) if rng.random() < 0.7 else hostile_text(rng)
    if prop == "query":
        return _query(rng) if tool == "afi.search" else hostile_text(rng)
    if prop == "encoding":
        return rng.choice(["utf-8", "base64", "base64", "latin-1", ""])
    if prop in ("x-as-of", "as_of"):
        return rng.choice(TIMES)
    if prop in ("x-kinds", "kinds"):
        return rng.choice(KINDS)
    if prop in ("append", "create_only", "parents", "recursive", "overwrite", "hold"):
        return rng.random() < 0.5
    return hostile_text(rng)  # data, text, block, if_match, id


PROPS = {
    "afi.manifest": [],
    "afi.stat": ["path"],
    "afi.list": ["path", "limit", "cursor", "glob"],
    "afi.read": ["path", "offset", "length"],
    "afi.search": ["query", "path", "limit", "cursor", "x-context", "x-kinds", "x-as-of", "x-budget"],
    "afi.write": ["path", "data", "encoding", "offset", "append", "create_only", "if_match"],
    "afi.mkdir": ["path", "parents"],
    "afi.delete": ["path", "recursive"],
    "afi.move": ["from", "to", "overwrite"],
    "memory.view": ["path"],
    "memory.read": ["path"],
    "memory.insert": ["text", "block", "path"],
    "memory.recall": ["query", "kinds", "top_k", "as_of", "budget"],
    "memory.forget": ["id", "block", "hold"],
}


def _arguments(rng: random.Random, tool: str) -> dict[str, Any]:
    props = PROPS[tool]
    chosen = [p for p in props if rng.random() < 0.65] or props[:1]
    args = {prop: _value(rng, tool, prop) for prop in chosen}
    if rng.random() < 0.08:
        args[rng.choice(["bogus", "", "__proto__", "path\x00", "a" * 500])] = rng.choice(WRONG_TYPES)
    return args


def hand_cases() -> list[tuple[str, dict[str, Any]]]:
    """Calls picked by hand: each names one way a tool could fall over."""
    bait = "/files/bait.txt"
    cases: list[tuple[str, dict[str, Any]]] = []
    for offset in HOSTILE_INTS:
        cases += [("afi.read", {"path": bait, "offset": offset}), ("afi.read", {"path": bait, "length": offset})]
        cases += [("afi.read", {"path": bait, "offset": offset, "length": 100})]
        cases += [("afi.write", {"path": "/files/at-offset.bin", "data": "x", "offset": offset})]
        cases += [("afi.write", {"path": "/facts/at-offset.md", "data": "x", "offset": offset})]
        cases += [("afi.list", {"path": "/files", "limit": offset}), ("afi.search", {"query": "a", "limit": offset})]
        cases += [
            ("afi.search", {"query": "a", "x-context": offset}),
            ("memory.recall", {"query": "a", "top_k": offset}),
        ]
        cases += [("afi.search", {"query": {"semantic": "a"}, "x-budget": offset})]
    cases += [("afi.write", {"path": "/files/far.bin", "data": "x", "offset": 10**9})]
    for cursor in BOGUS_CURSORS:
        cases += [("afi.list", {"path": "/files", "cursor": cursor}), ("afi.search", {"query": "a", "cursor": cursor})]
        cases += [("afi.search", {"query": {"regex": "a"}, "path": "/files", "cursor": cursor})]
    for regex in BAD_REGEXES:
        cases += [
            ("afi.search", {"query": {"regex": regex}}),
            ("afi.search", {"query": {"regex": regex, "flags": "i"}}),
        ]
    for data in ("%%%", "a", "=" * 8, "YQ", "Y\nQ=", "\x00"):
        cases += [("afi.write", {"path": "/files/b64.bin", "data": data, "encoding": "base64"})]
    for name in ("afi.nope", "afi_stat", "memory_read", "", "a" * 5000, "../afi.stat", "afi.stat\x00", "call_tool"):
        cases += [(name, {"path": "/"})]
    cases += [("afi.move", {"from": "/facts", "to": "/files/x"}), ("afi.move", {"from": "/files", "to": "/files/in"})]
    cases += [("afi.move", {"from": bait, "to": "/facts/bait.md"}), ("afi.move", {"from": bait, "to": bait + "/in"})]
    cases += [
        ("afi.delete", {"path": "/", "recursive": True}),
        ("afi.mkdir", {"path": "/files/a/b/c", "parents": False}),
    ]
    cases += [("memory.insert", {"text": "x", "path": "../../etc/passwd"}), ("memory.insert", {"text": "x"})]
    cases += [("memory.insert", {"text": "x", "block": "b", "path": "p"}), ("memory.forget", {})]
    cases += [("memory.forget", {"id": "0" * 12}), ("memory.forget", {"id": "../" * 4}), ("memory.read", {"path": ""})]
    return cases


def tool_cases(seed: int, count: int) -> list[tuple[str, dict[str, Any]]]:
    """Given a seed, return ``count`` or more calls: the hand list, then generated ones."""
    rng = random.Random(seed)
    cases = hand_cases()
    while len(cases) < count:
        tool = rng.choice(TOOLS)
        cases.append((tool, _arguments(rng, tool)))
    return cases


PROTOCOL = "2025-06-18"
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
STAT = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "afi.stat", "arguments": {"path": "/"}}}
METHODS = ["", "x" * 10_000, "tools/nope", "rpc.discover", "initialize", "notifications/initialized", "ping"]
METHODS += ["notifications/cancelled", "resources/read", "resources/list", "resources/templates/list", "prompts/list"]
METHODS += ["prompts/get", "completion/complete", "logging/setLevel", "resources/subscribe", "sampling/createMessage"]
METHODS += ["tasks/list", "tasks/get", "server/discover", "../tools/call", "tools/call\u0000", "tools/list"]
URIS = ["afi://../../etc/passwd", "file:///etc/passwd", "", "afi://", "afi:///", "afi://files/\u0000", "http://x"]
URIS += ["afi://" + "a/" * 600, "afi://facts/seed.md", "afi://files/bait.txt", "afi://.afi/search", "afi://%2e%2e/x"]


@dataclass(frozen=True)
class Raw:
    """One raw HTTP request at the MCP endpoint (``session``: send the live session's id)."""

    body: bytes = b""
    method: str = "POST"
    url: str = "/mcp"
    headers: tuple[tuple[str, str], ...] = ()
    session: bool = True


def _mutate(rng: random.Random, request: dict[str, Any]) -> dict[str, Any]:
    """Given a request, return it with one field broken: wrong type, wrong value, missing, or extra."""
    out = json.loads(json.dumps(request))
    roll = rng.random()
    if roll < 0.15:
        out["jsonrpc"] = rng.choice(["1.0", 2, None, "", "2.0 "])
    elif roll < 0.3:
        out["id"] = rng.choice([None, {}, [], 1.5, 2**70, -1, "", "x" * 10_000, True])
    elif roll < 0.45:
        out["method"] = rng.choice([*METHODS, None, 1, [], {}])
    elif roll < 0.6:
        out["params"] = rng.choice([None, [], "x", 1, {}, {"name": None}, {"arguments": {}}, {"uri": rng.choice(URIS)}])
    elif roll < 0.85:
        params = out.setdefault("params", {})
        if not isinstance(params, dict):
            return out
        key = rng.choice(["name", "arguments", "_meta", "uri", "cursor", "level"])
        params[key] = rng.choice(
            [
                None,
                1,
                [],
                "x" * 100_000,
                rng.choice(URIS),
                {"path": hostile_path(rng)},
                {"idempotencyKey": rng.choice([[], {}, 1, None, "k" * 100_000, True, 1.5, "\x00"])},
                {"progressToken": rng.choice([[], {}, 1.5, None])},
                rng.choice(["afi.stat", "afi.write", "memory.view", "call_tool", "search_tools"]),
                rng.choice(BOGUS_CURSORS),
                rng.choice(["debug", "emergency", "nope", 1]),
            ]
        )
    else:
        out[rng.choice(["extra", "result", "error", "", "__proto__"])] = rng.choice([None, {}, "x", {"code": 1}])
    for key in [k for k in out if rng.random() < 0.05]:
        del out[key]
    return out


def json_bytes(value: Any) -> bytes:
    """Given a JSON value, return it as UTF-8, lone surrogates kept as raw (invalid) UTF-8."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


def envelopes(rng: random.Random, count: int) -> list[bytes]:
    """Given a generator, return JSON-RPC bodies no client would send: broken JSON, broken envelopes, batches."""
    bodies = malformed_json(rng)
    call = lambda args: {**STAT, "params": {"name": "afi.stat", "arguments": args}}  # noqa: E731
    for text in LONE_SURROGATES:
        bodies.append(json.dumps(call({"path": "/files/" + text})).encode())  # escaped: JSON allows it
        bodies.append(json_bytes(call({"path": "/files/" + text})))  # raw: not UTF-8
    batches: list[Any] = [[STAT, STAT], [], [1], [STAT] * 100, [INITIALIZED, STAT], INIT]
    batches += [{"jsonrpc": "2.0", "id": 1, "result": {}}, {"jsonrpc": "2.0", "id": 1, "error": "x"}]
    batches += [{"jsonrpc": "2.0", "id": 7, "error": {"code": 1, "message": "x"}}]
    bodies += [json_bytes(batch) for batch in batches]
    for uri in URIS:
        bodies.append(json_bytes({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": uri}}))
    for method in METHODS:
        bodies.append(json_bytes({"jsonrpc": "2.0", "id": 3, "method": method, "params": {}}))
    while len(bodies) < count:
        base = rng.choice([STAT, INIT, INITIALIZED, call({"path": hostile_path(rng)})])
        bodies.append(json_bytes(_mutate(rng, base)))
    return bodies


def raw_http_cases(rng: random.Random) -> list[Raw]:
    """Requests at the HTTP layer: hostile bodies, headers, methods and URLs around the MCP endpoint."""
    bodies = envelopes(rng, 450)
    cases = [Raw(body) for body in bodies]
    modern = (("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "afi.stat"))
    cases += [Raw(body, headers=modern, session=False) for body in bodies[::3]]  # the 2026 revision: no session
    cases += [Raw(body, session=False) for body in malformed_json()]
    valid = json_bytes(STAT)
    header_values = {
        "content-type": ["text/plain", "", "application/json; charset=latin-1", "multipart/form-data", "a" * 9000],
        "accept": ["", "text/html", "application/json", "text/event-stream", "*/*", "x" * 9000],
        "mcp-session-id": ["x", "", "a" * 10_000, "../", "\u00ff", "0" * 32],
        "mcp-protocol-version": ["x", "1999-01-01", "2026-07-28", "9999-99-99", ""],
        "origin": ["null", "http://evil.example", "file://", "http://127.0.0.1.evil.example", "http://[::1"],
        "authorization": ["", "Bearer", "Bearer ", "Bearer x", "Basic Zm9vOmJhcg==", "Bearer " + "a" * 10_000],
        "x-mcp-idempotency-key": ["", "k" * 10_000, "\x01"],
        "x-mcp-stateless": ["maybe", "1", "true"],
        "mcp-method": ["tools/call", "x"],
        "mcp-name": ["afi.stat", "nope"],
    }
    for name, values in header_values.items():
        for value in values:
            cases.append(Raw(valid, headers=((name, value),), session=name != "mcp-session-id"))
    for method in ("GET", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD", "FOO"):
        cases.append(Raw(method=method, session=False))
        cases.append(Raw(method=method, session=False, headers=(("mcp-session-id", "bogus"),)))
    for url in (
        "/mcp/",
        "/mcp?mode=discovery",
        "/mcp?mode=%ff",
        "/mcp?stateless=1",
        "/mcp?stateless=maybe",
        "/mcp?api_key=x",
        "/mcp?%ff=1",
        "/spaces/x/mcp",
        "/spaces/..%2f..%2f/mcp",
        "/spaces/%00/mcp",
        "/spaces/" + "a" * 5000 + "/mcp",
        "/spaces/default/mcp",
        "/mcp?" + "a=1&" * 5000,
    ):
        cases.append(Raw(valid, url=url, session=False))
        cases.append(Raw(json_bytes(INIT), url=url, session=False))
    big = json_bytes(
        {**STAT, "params": {"name": "afi.write", "arguments": {"path": "/files/big", "data": "x" * (5 << 20)}}}
    )
    cases += [Raw(big), Raw(b"x" * (5 << 20)), Raw(big, session=False)]
    return cases
