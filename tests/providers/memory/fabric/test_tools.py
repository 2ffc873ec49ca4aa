"""The five governed tools as a library host gets them (``create_fabric_tools(provider, caller)``): each
works for an attached session, each effect is the provider's verb, and each refusal leaves nothing changed."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from afi.errors import AfiError, Forbidden, NotFound
from afi.provider import Caller
from afi.providers.memory import (
    MemoryLimitError,
    MemoryNotAttachedError,
    MemoryValidationError,
    create_fabric_tools,
)
from afi.providers.memory.fabric.tools import MAX_VIEW_ENTRIES, ToolDefinition
from afi.providers.memory.provider import MemoryProvider

AGENT = Caller(principal="agent", space="default")


@dataclass(frozen=True)
class Session:
    """The least a host session offers the fabric: an id and its entries."""

    id: str

    def entries(self) -> list[dict[str, Any]]:
        return []


@pytest.fixture
def provider(tmp_path: Path) -> MemoryProvider:
    return MemoryProvider(tmp_path / "memory.db", tmp_path / "files")


@pytest.fixture
def fabric(provider: MemoryProvider) -> Any:
    """The fabric of the caller's space: the tools' gate, and where their notes land."""
    return provider.fabric(AGENT.space)


@pytest.fixture
def tools(provider: MemoryProvider) -> dict[str, ToolDefinition]:
    return by_name(create_fabric_tools(provider, AGENT))


@pytest.fixture
def root(provider: MemoryProvider) -> Path:
    """The caller's /files on disk."""
    path = provider.root / AGENT.space
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def session(fabric: Any) -> Session:
    session = Session("s1")
    fabric.attach(session)
    return session


def by_name(tools: list[ToolDefinition]) -> dict[str, ToolDefinition]:
    return {tool.name: tool for tool in tools}


def test_five_inert_definitions_with_kinds_and_schemas(provider: MemoryProvider, root: Path) -> None:
    tools = create_fabric_tools(provider, AGENT)
    assert [t.name for t in tools] == ["memory.view", "memory.read", "memory.insert", "memory.recall", "memory.forget"]
    assert [t.kind for t in tools] == ["read", "read", "edit", "search", "delete"]
    for tool in tools:
        assert tool.input_schema["type"] == "object" and tool.description
    assert list(root.iterdir()) == []  # building the tools touched nothing


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        pytest.param("memory.view", {}, id="view"),
        pytest.param("memory.read", {"path": "a.md"}, id="read"),
        pytest.param("memory.insert", {"text": "x", "path": "a.md"}, id="insert-file"),
        pytest.param("memory.insert", {"text": "x", "block": "core"}, id="insert-block"),
        pytest.param("memory.recall", {"query": "units"}, id="recall"),
        pytest.param("memory.forget", {"block": "core"}, id="forget"),
    ],
)
def test_every_tool_refuses_an_unattached_session(
    fabric: Any, tools: dict[str, ToolDefinition], root: Path, name: str, arguments: dict[str, Any]
) -> None:
    (root / "a.md").write_text("before")
    fabric.attach(Session("someone-else"))
    with pytest.raises(MemoryNotAttachedError) as info:
        tools[name].run(Session("s1"), arguments)
    assert info.value.code == "forbidden"
    assert (root / "a.md").read_text() == "before"
    assert fabric.blocks() == {}


def test_detach_closes_the_gate_again(fabric: Any, tools: dict[str, ToolDefinition], root: Path) -> None:
    session = Session("s1")
    attachment = fabric.attach(session)
    assert tools["memory.view"].run(session, {})["entries"] == []
    attachment.detach()
    with pytest.raises(MemoryNotAttachedError):
        tools["memory.view"].run(session, {})


def test_view_lists_names_and_sizes_sorted(tools: dict[str, ToolDefinition], root: Path, session: Session) -> None:
    (root / "b.md").write_text("hello")
    (root / "a").mkdir()
    (root / "a" / "deep.md").write_text("x")
    result = tools["memory.view"].run(session, {})
    assert result["entries"] == [{"name": "a", "kind": "directory"}, {"name": "b.md", "kind": "file", "bytes": 5}]
    assert result["truncated"] is False
    sub = tools["memory.view"].run(session, {"path": "a"})
    assert sub["entries"] == [{"name": "deep.md", "kind": "file", "bytes": 1}]


def test_view_caps_at_200_entries(tools: dict[str, ToolDefinition], root: Path, session: Session) -> None:
    for i in range(MAX_VIEW_ENTRIES + 5):
        (root / f"n{i:03d}.md").write_text("")
    result = tools["memory.view"].run(session, {})
    assert len(result["entries"]) == MAX_VIEW_ENTRIES and result["truncated"] is True


def test_view_never_creates(tools: dict[str, ToolDefinition], root: Path, session: Session) -> None:
    with pytest.raises(NotFound):
        tools["memory.view"].run(session, {"path": "nested"})
    assert not (root / "nested").exists()


def test_read_is_bounded_and_flagged(provider: MemoryProvider, root: Path, session: Session) -> None:
    (root / "big.md").write_bytes(b"a" * 100 + "é".encode() + b"tail")  # the cap falls inside the 2-byte é
    read = by_name(create_fabric_tools(provider, AGENT, max_file_bytes=101))["memory.read"]
    result = read.run(session, {"path": "big.md"})
    assert result["text"] == "a" * 100 and result["truncated"] is True and result["bytes"] == 106
    (root / "small.md").write_text("whole")
    assert read.run(session, {"path": "small.md"}) == {
        "path": "small.md",
        "text": "whole",
        "bytes": 5,
        "truncated": False,
    }


def test_read_missing_file_is_not_found(tools: dict[str, ToolDefinition], session: Session) -> None:
    with pytest.raises(NotFound):
        tools["memory.read"].run(session, {"path": "nope.md"})


def outside_setup(tmp_path: Path, root: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    os.symlink(outside, root / "link")
    os.symlink(outside / "secret.md", root / "secret.md")


ESCAPES = [
    pytest.param("../outside/secret.md", id="dotdot"),
    pytest.param("a/../../outside/secret.md", id="nested-dotdot"),
    pytest.param("/etc/passwd", id="absolute"),
    pytest.param("link/secret.md", id="symlinked-dir"),
    pytest.param("secret.md", id="symlinked-file"),
]


@pytest.mark.parametrize("path", ESCAPES)
@pytest.mark.parametrize("name", ["memory.view", "memory.read", "memory.insert"])
def test_paths_leaving_the_jail_are_refused_before_any_io(
    fabric: Any, tools: dict[str, ToolDefinition], tmp_path: Path, root: Path, session: Session, path: str, name: str
) -> None:
    outside_setup(tmp_path, root)
    arguments = {"path": path, "text": "grown"} if name == "memory.insert" else {"path": path}
    with pytest.raises(AfiError) as info:
        tools[name].run(session, arguments)
    assert info.value.code == "invalid_path", info.value
    assert (tmp_path / "outside" / "secret.md").read_text() == "secret"
    assert sorted(p.name for p in (tmp_path / "outside").iterdir()) == ["secret.md"]
    assert fabric.find_file(path) is None


@pytest.mark.parametrize("name", ["memory.view", "memory.read", "memory.insert"])
def test_file_tools_act_with_the_callers_scopes(
    provider: MemoryProvider, root: Path, session: Session, name: str
) -> None:
    """A tool's effect is the provider's verb for its caller: a key without afi:read (or afi:write for an
    insert) is refused as it would be at any door, and nothing is written."""
    (root / "a.md").write_text("before")
    scopes = frozenset({"afi:read"}) if name == "memory.insert" else frozenset()
    tool = by_name(create_fabric_tools(provider, Caller("reader", space=AGENT.space, scopes=scopes)))[name]
    arguments = {"path": "a.md", "text": "x"} if name == "memory.insert" else {"path": "a.md"}
    with pytest.raises(Forbidden):
        tool.run(session, arguments)
    assert (root / "a.md").read_text() == "before"


def test_insert_appends_lines_creates_parents_and_refreshes_the_file_note(
    fabric: Any, tools: dict[str, ToolDefinition], root: Path, session: Session
) -> None:
    insert = tools["memory.insert"]
    first = insert.run(session, {"path": "notes/deploy.md", "text": "Deploy via canary first"})
    assert (root / "notes" / "deploy.md").read_text() == "Deploy via canary first"
    second = insert.run(session, {"path": "notes/deploy.md", "text": "Then watch the dashboard"})
    insert.run(session, {"path": "notes/deploy.md", "text": "\nkept as given"})
    text = (root / "notes" / "deploy.md").read_text()
    assert text == "Deploy via canary first\nThen watch the dashboard\nkept as given"
    assert second["bytes"] == len("Deploy via canary first\nThen watch the dashboard")
    note = fabric.find_file("notes/deploy.md")
    assert note is not None and note.kind == "file" and note.content == text
    assert first["note_id"] == second["note_id"] == note.id  # same path: the note is refreshed in place
    assert second["note_truncated"] is False
    hits = fabric.recall("canary dashboard", kinds=["file"]).hits
    assert [h.id for h in hits] == [note.id]


def test_insert_reports_a_truncated_note(provider: MemoryProvider, fabric: Any, root: Path, session: Session) -> None:
    limit = fabric.memory.limits.max_entry_text_chars
    (root / "long.md").write_text("word " * (limit // 5 + 10))
    result = by_name(create_fabric_tools(provider, AGENT, max_file_bytes=1024 * 1024))["memory.insert"].run(
        session, {"path": "long.md", "text": "end"}
    )
    assert result["note_truncated"] is True
    note = fabric.find_file("long.md")
    assert note is not None and len(note.content) == limit


def test_over_cap_insert_is_refused_and_touches_nothing(
    provider: MemoryProvider, fabric: Any, root: Path, session: Session
) -> None:
    insert = by_name(create_fabric_tools(provider, AGENT, max_file_bytes=20))["memory.insert"]
    (root / "full.md").write_text("0123456789")
    with pytest.raises(MemoryLimitError) as info:
        insert.run(session, {"path": "full.md", "text": "0123456789"})  # 10 + newline + 10 > 20
    assert info.value.code == "too_large"
    assert (root / "full.md").read_text() == "0123456789"
    with pytest.raises(MemoryLimitError):
        insert.run(session, {"path": "new/dir/file.md", "text": "x" * 21})
    assert not (root / "new").exists()
    assert fabric.find_file("full.md") is None and fabric.find_file("new/dir/file.md") is None


@pytest.mark.parametrize("cap", [0, -1, 1024 * 1024 + 1])
def test_max_file_bytes_outside_its_range_is_refused(provider: MemoryProvider, cap: int) -> None:
    with pytest.raises(MemoryValidationError, match="max_file_bytes"):
        create_fabric_tools(provider, AGENT, max_file_bytes=cap)


def test_insert_into_a_block_and_forget_it(fabric: Any, tools: dict[str, ToolDefinition], session: Session) -> None:
    created = tools["memory.insert"].run(session, {"block": "core", "text": "Prefers terse output"})
    grown = tools["memory.insert"].run(session, {"block": "core", "text": "Uses metric units"})
    assert created["created"] is True and grown["created"] is False
    assert "Prefers terse output" in fabric.blocks()["core"].content
    assert "Uses metric units" in fabric.blocks()["core"].content
    forgotten = tools["memory.forget"].run(session, {"block": "core"})
    assert forgotten["block"] == "core" and forgotten["deleted"] == 1
    assert "core" not in fabric.blocks() or fabric.blocks()["core"].content == ""


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        pytest.param("memory.insert", {"text": "x"}, "exactly one", id="insert-no-target"),
        pytest.param("memory.insert", {"text": "x", "block": "core", "path": "a.md"}, "exactly one", id="insert-two"),
        pytest.param("memory.insert", {"text": "", "block": "core"}, "text", id="insert-empty"),
        pytest.param("memory.recall", {"query": "x", "kinds": ["nope"]}, "kinds", id="recall-bad-kind"),
        pytest.param("memory.recall", {"query": "x", "top_k": "3"}, "top_k", id="recall-bad-type"),
        pytest.param("memory.forget", {}, "exactly one", id="forget-no-target"),
        pytest.param("memory.read", {"path": "a.md", "extra": 1}, "extra", id="unknown-argument"),
    ],
)
def test_bad_arguments_are_refused(
    fabric: Any, tools: dict[str, ToolDefinition], session: Session, name: str, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(MemoryValidationError, match=message):
        tools[name].run(session, arguments)
    assert fabric.blocks() == {}


def test_recall_and_forget_pass_through(fabric: Any, tools: dict[str, ToolDefinition], session: Session) -> None:
    fact = fabric.remember(kind="fact", content="User prefers metric units", tags=["prefs"])
    fabric.remember(kind="procedure", content="Deploy via canary first")
    result = tools["memory.recall"].run(session, {"query": "metric units", "top_k": 5})
    assert [h["id"] for h in result["hits"]] == [fact.id]
    assert result["explain"][0]["id"] == fact.id and "score" in result["explain"][0]
    procedures = tools["memory.recall"].run(session, {"query": "canary deploy", "kinds": ["procedure"]})
    assert [h["kind"] for h in procedures["hits"]] == ["procedure"]
    held = tools["memory.forget"].run(session, {"id": fact.id, "hold": True})
    assert held["held"] is True and held["deleted"] == 0
    assert tools["memory.recall"].run(session, {"query": "metric units"})["hits"] == []


def test_a_symlinked_space_folder_is_refused_by_the_file_tools(provider: MemoryProvider, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside secret")
    os.symlink(outside, provider.root / "evil")
    evil = Caller("agent", space="evil")
    session = Session("s1")
    calls = [
        ("memory.view", {"path": ""}),
        ("memory.read", {"path": "secret.txt"}),
        ("memory.insert", {"path": "planted.txt", "text": "x"}),
    ]
    provider.fabric(evil.space).attach(session)
    tools = by_name(create_fabric_tools(provider, evil))
    for name, args in calls:
        with pytest.raises(AfiError, match="space folder") as info:
            tools[name].run(session, args)
        assert info.value.code == "invalid_path"
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    good = Caller("agent", space="good")
    provider.fabric(good.space).attach(session)
    by_name(create_fabric_tools(provider, good))["memory.insert"].run(session, {"path": "notes.txt", "text": "inside"})
    assert (provider.root / "good" / "notes.txt").read_text() == "inside"
