"""The ``memory.*`` tools as the MCP host serves them act through the provider, as the MCP caller.

Driven by the official SDK client against the real server object over a real store: a tool's write
takes the space's write lock, lands in the audit log, keeps to the workspace's limits and index, and
is then what every other door sees.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult

from afi.app.mcp import memory_fabric_sessions
from afi.bindings.mcp import McpBinding, stdio_info
from afi.errors import Forbidden
from afi.model import SearchRequest
from afi.provider import Caller
from afi.providers.memory.fabric.errors import MemoryNotAttachedError
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.tools import ProviderToolBackend
from afi.providers.memory.workspace.workspace import WorkspaceLimits
from tests.support.mcp import error_of, run

AGENT = Caller("agent-7", space="team")
READER = Caller("reader-1", space="team", scopes=frozenset({"afi:read"}))

Calls = list[tuple[str, dict[str, Any]]]


def _provider(tmp_path: Path, limits: WorkspaceLimits | None = None) -> MemoryProvider:
    return MemoryProvider(tmp_path / "afi.db", tmp_path / "files", workspace_limits=limits)


def _binding(provider: MemoryProvider, caller: Caller = AGENT, session: str = "s1") -> McpBinding:
    info = stdio_info(caller, "tools", session)
    return McpBinding(provider, fabric=memory_fabric_sessions(provider), default_info=info)


def _call(binding: McpBinding, calls: Calls) -> list[CallToolResult]:
    """Make the calls in order over one SDK client session; return their results."""
    results: list[CallToolResult] = []

    async def body() -> None:
        async with Client(binding.server, mode="legacy") as client:
            for name, args in calls:
                results.append(await client.call_tool(name, args))

    run(body)
    return results


def _answer(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def _rows(provider: MemoryProvider, principal: str) -> list[tuple[str, str, str]]:
    """The audit rows of one principal, oldest first, as (verb, path, result)."""
    rows = [r for r in provider.audit_log(limit=1000) if r["principal"] == principal]
    assert all(r["space"] == "team" for r in rows)
    return [(r["verb"], r["path"], r["result"]) for r in reversed(rows)]


def test_inserts_and_forgets_are_provider_writes_audited_as_the_mcp_caller(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    results = _call(
        _binding(provider),
        [
            ("memory.insert", {"path": "notes/log.md", "text": "first"}),
            ("memory.insert", {"path": "notes/log.md", "text": "second"}),
            ("memory.insert", {"block": "scratch", "text": "a line"}),
            ("memory.insert", {"block": "scratch", "text": "another"}),
            ("memory.forget", {"block": "scratch"}),
        ],
    )
    first, second, block, again, forgot = (_answer(r) for r in results)
    note = provider.fabric("team").find_file("notes/log.md")
    assert note is not None and note.content == "first\nsecond"
    assert first["path"] == "notes/log.md" and first["bytes"] == 5
    assert second == {"path": "notes/log.md", "bytes": 12, "note_id": note.id, "note_truncated": False}
    assert block["created"] is True and again["created"] is False and again["chars"] == len("a line\nanother")
    assert forgot["block"] == "scratch" and forgot["deleted"] == 1
    assert "scratch" not in provider.fabric("team").blocks()

    forget_note = _call(_binding(provider, session="s2"), [("memory.forget", {"id": note.id, "hold": True})])
    assert _answer(forget_note[0])["held"] is True
    assert _rows(provider, "agent-7") == [
        ("write", "/files/notes/log.md", "ok"),
        ("write", "/files/notes/log.md", "ok"),
        ("append_block", "/working/scratch.md", "ok"),
        ("append_block", "/working/scratch.md", "ok"),
        ("forget", "/working/scratch.md", "ok"),
        ("forget", f"/history/{note.id}.md", "ok"),
    ]


def test_a_read_key_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    refused = _call(
        _binding(provider, READER),
        [
            ("memory.insert", {"path": "notes/x.md", "text": "nope"}),
            ("memory.insert", {"block": "scratch", "text": "nope"}),
            ("memory.forget", {"block": "scratch"}),
        ],
    )
    for result in refused:
        error = error_of(result)
        assert error["code"] == "forbidden" and "afi:write" in error["message"]
    assert _rows(provider, "reader-1") == []  # the binding's scope gate answers first, as for afi.write
    assert not (tmp_path / "files" / "team" / "notes").exists()


def test_an_inserted_file_is_a_workspace_file_every_door_sees(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    inserted, viewed, read, recalled = _call(
        _binding(provider),
        [
            ("memory.insert", {"path": "notes/todo.md", "text": "buy coffee beans"}),
            ("memory.view", {"path": "notes"}),
            ("memory.read", {"path": "./notes//todo.md"}),
            ("memory.recall", {"query": "coffee beans"}),
        ],
    )
    note_id = _answer(inserted)["note_id"]
    assert provider.read(AGENT, "/files/notes/todo.md").data == b"buy coffee beans"
    entry = provider.stat(AGENT, "/files/notes/todo.md")
    assert entry.type == "file" and entry.size == 16
    assert _answer(viewed) == {
        "path": "notes",
        "entries": [{"name": "todo.md", "kind": "file", "bytes": 16}],
        "truncated": False,
    }
    assert _answer(read) == {"path": "notes/todo.md", "text": "buy coffee beans", "bytes": 16, "truncated": False}
    assert note_id in [hit["id"] for hit in _answer(recalled)["hits"]]
    exact = provider.search(AGENT, SearchRequest(query="coffee", path="/files"))  # the file index
    assert [m.path for m in exact.matches] == ["/files/notes/todo.md"]
    semantic = provider.search(AGENT, SearchRequest(query={"semantic": "coffee beans"}))
    assert (semantic.matches[0].path, semantic.matches[0].x_id) == ("/files/notes/todo.md", note_id)


def test_recall_sees_only_the_callers_space(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    provider.remember(Caller("someone", space="other"), kind="fact", content="The canary sings at dawn.")
    provider.remember(AGENT, kind="fact", content="The kettle whistles at noon.")
    (recalled,) = _call(_binding(provider), [("memory.recall", {"query": "canary sings at dawn"})])
    contents = [hit["content"] for hit in _answer(recalled)["hits"]]
    assert "The canary sings at dawn." not in contents and "The kettle whistles at noon." in contents


@pytest.mark.parametrize(
    ("limits", "setting"),
    [
        (WorkspaceLimits(space_quota_bytes=100), "AFI_SPACE_QUOTA"),
        (WorkspaceLimits(max_file_bytes=16), "AFI_MAX_FILE_SIZE"),
    ],
)
def test_an_insert_past_the_workspace_limits_is_refused_and_leaves_nothing(
    tmp_path: Path, limits: WorkspaceLimits, setting: str
) -> None:
    provider = _provider(tmp_path, limits)
    provider.write(AGENT, "/files/big.bin", b"x" * 15)
    (refused,) = _call(_binding(provider), [("memory.insert", {"path": "d/new.md", "text": "y" * 90})])
    error = error_of(refused)
    assert error["code"] == "too_large" and setting in error["message"]
    assert not (tmp_path / "files" / "team" / "d").exists()
    assert _rows(provider, "agent-7")[-1] == ("write", "/files/d/new.md", "too_large")


def test_the_tools_byte_cap_holds_for_a_new_file_and_a_growing_one(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    cap = 50 * 1024
    provider.write(AGENT, "/files/near.md", b"z" * (cap - 3))
    too_big, grows, fits, read = _call(
        _binding(provider),
        [
            ("memory.insert", {"path": "new.md", "text": "a" * (cap + 1)}),
            ("memory.insert", {"path": "near.md", "text": "abc"}),  # + "\n" makes cap + 1
            ("memory.insert", {"path": "near.md", "text": "\nab"}),
            ("memory.read", {"path": "near.md"}),
        ],
    )
    for result in (too_big, grows):
        error = error_of(result)
        assert error["code"] == "too_large" and f"past {cap} bytes" in error["message"]
    assert _answer(fits)["bytes"] == cap and _answer(fits)["note_truncated"] is True
    assert _answer(read)["truncated"] is False and _answer(read)["bytes"] == cap
    assert not (tmp_path / "files" / "team" / "new.md").exists()
    assert provider.stat(AGENT, "/files/near.md").size == cap


def test_concurrent_inserts_from_two_threads_lose_nothing(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    count = 20
    failures: list[BaseException] = []

    def writer(tag: str) -> None:
        try:
            calls: Calls = [("memory.insert", {"path": "shared/log.md", "text": f"{tag}-{i}"}) for i in range(count)]
            for result in _call(_binding(provider, session=f"s-{tag}"), calls):
                _answer(result)
        except BaseException as err:  # reported on the main thread
            failures.append(err)

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    lines = provider.read(AGENT, "/files/shared/log.md").data.decode().split("\n")
    assert sorted(lines) == sorted(f"{tag}-{i}" for tag in ("a", "b") for i in range(count))
    writes = [row for row in _rows(provider, "agent-7") if row[:2] == ("write", "/files/shared/log.md")]
    assert sum(result == "ok" for _, _, result in writes) == 2 * count


def test_view_and_read_keep_to_the_workspace_rules(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    provider.write(AGENT, "/files/d/keep.txt", b"kept")
    folder = tmp_path / "files" / "team" / "d"
    (folder / ".afi-tmp-orphan").write_bytes(b"half")  # a crashed writer's temporary file
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"secret")
    os.link(outside, folder / "linked.txt")
    for i in range(201):
        (tmp_path / "files" / "team" / "many").mkdir(exist_ok=True)
        (tmp_path / "files" / "team" / "many" / f"f{i:03}").write_bytes(b"")
    viewed, many, linked, append_linked, escape, absolute, both = _call(
        _binding(provider),
        [
            ("memory.view", {"path": "d"}),
            ("memory.view", {"path": "many"}),
            ("memory.read", {"path": "d/linked.txt"}),
            ("memory.insert", {"path": "d/linked.txt", "text": "more"}),
            ("memory.read", {"path": "../../etc/passwd"}),
            ("memory.insert", {"path": "/etc/passwd", "text": "x"}),
            ("memory.insert", {"path": "a.md", "block": "b", "text": "x"}),
        ],
    )
    assert [e["name"] for e in _answer(viewed)["entries"]] == ["keep.txt", "linked.txt"]
    assert len(_answer(many)["entries"]) == 200 and _answer(many)["truncated"] is True
    assert error_of(linked)["code"] == "forbidden" and error_of(append_linked)["code"] == "forbidden"
    assert outside.read_bytes() == b"secret"
    assert error_of(escape)["code"] == "invalid_path" and error_of(absolute)["code"] == "invalid_path"
    assert "exactly one of 'block' or 'path'" in error_of(both)["message"]


def test_a_closed_sessions_tools_refuse(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    sessions = memory_fabric_sessions(provider)
    tools = {spec.name: spec for spec in sessions.open(AGENT, "s1")}
    assert tools["memory.insert"].call(AGENT, {"block": "b", "text": "while attached"}).structured["created"] is True
    sessions.close("s1")
    with pytest.raises(MemoryNotAttachedError):
        tools["memory.insert"].call(AGENT, {"block": "b", "text": "after close"})
    assert provider.fabric("team").blocks()["b"].content == "while attached"
    with pytest.raises(Forbidden):  # a refusal never depends on the arguments being valid
        tools["memory.view"].call(AGENT, {"bogus": 1})


class _Interloper:
    """The provider, but another door appends to the file just before the tool's first write lands."""

    def __init__(self, provider: MemoryProvider, sneaked: bytes) -> None:
        self.provider, self.sneaked, self.armed = provider, sneaked, True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.provider, name)

    def write(self, caller: Caller, path: str, data: bytes, **options: Any) -> Any:
        if self.armed:
            self.armed = False
            self.provider.write(Caller("other-door", space="team"), path, self.sneaked, append=True)
        return self.provider.write(caller, path, data, **options)


@pytest.mark.parametrize(
    ("start", "sneaked", "after"),
    [(None, b"sneaked", "sneaked\nmine"), (b"start", b"\nsneaked", "start\nsneaked\nmine")],
)
def test_an_append_that_lost_its_race_looks_again(
    tmp_path: Path, start: bytes | None, sneaked: bytes, after: str
) -> None:
    provider = _provider(tmp_path)
    if start is not None:
        provider.write(AGENT, "/files/f.md", start)
    backend = ProviderToolBackend(_Interloper(provider, sneaked), AGENT)
    answer = backend.append_file("f.md", "mine")
    assert provider.read(AGENT, "/files/f.md").data.decode() == after and answer["bytes"] == len(after)
    assert _rows(provider, "agent-7")[-2:] == [("write", "/files/f.md", "conflict"), ("write", "/files/f.md", "ok")]


def test_a_conflict_that_is_no_race_is_answered_at_once(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    provider.write(AGENT, "/files/f.md", b"a file")
    (under_a_file,) = _call(_binding(provider), [("memory.insert", {"path": "f.md/child.md", "text": "x"})])
    assert error_of(under_a_file)["code"] == "conflict"
    assert _rows(provider, "agent-7")[-1] == ("write", "/files/f.md/child.md", "conflict")
    assert len(_rows(provider, "agent-7")) == 2
