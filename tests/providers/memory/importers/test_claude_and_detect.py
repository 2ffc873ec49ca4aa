"""Importing a Claude memory-tool directory, and telling the formats apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from afi.errors import InvalidPath, TooLarge
from afi.providers.memory.importers import detect, import_foreign

from .notes import OWNER, provider_on


def _memories(root: Path) -> Path:
    folder = root / "memories"
    (folder / "projects").mkdir(parents=True)
    (folder / "user_preferences.xml").write_text("<prefs><tone>terse</tone><pet>okapi</pet></prefs>\n")
    (folder / "projects" / "afi.md").write_text("# afi\nThe zebra release ships on Friday.\n")
    (folder / ".DS_Store").write_bytes(b"\x00\x01")
    return folder


def test_a_claude_memory_directory_stays_files_under_files_memories(tmp_path: Path) -> None:
    provider = provider_on(tmp_path)
    seen: list[tuple[int, int]] = []
    report = import_foreign(provider, _memories(tmp_path), fmt=None, space="default",
                            progress=lambda *a: seen.append(a))  # fmt: skip
    assert report.format == "claude-memories" and report.files_written == 2 and seen[-1] == (2, 2)
    afi_md = provider.read(OWNER, "/files/memories/projects/afi.md").data
    assert afi_md == b"# afi\nThe zebra release ships on Friday.\n"
    assert b"okapi" in provider.read(OWNER, "/files/memories/user_preferences.xml").data
    assert [e.path for e in provider.list(OWNER, "/files/memories").entries] == [
        "/files/memories/projects", "/files/memories/user_preferences.xml"
    ]  # fmt: skip
    file_note = provider.fabric("default").find_file("memories/projects/afi.md")
    assert file_note is not None and "zebra release" in file_note.content
    assert report.summary() == (
        "imported 2 files from a Claude memory directory; skipped: 1 hidden, linked or special: .DS_Store"
    )
    again = import_foreign(provider, tmp_path / "memories", fmt="claude-memories", space="default")
    assert (again.files_written, again.files_unchanged) == (0, 2)
    assert again.summary().startswith("imported 2 files from a Claude memory directory: 2 files unchanged")
    writes = [row for row in provider.audit_log(limit=50) if row["verb"] == "write"]
    assert len(writes) == 2  # the second import wrote nothing


def test_a_memory_file_over_the_cap_is_refused_before_any_write(tmp_path: Path) -> None:
    provider = provider_on(tmp_path)
    folder = _memories(tmp_path)
    (folder / "zzz.log").write_bytes(b"x" * 300)
    provider.workspace_limits = type(provider.workspace_limits)(max_file_bytes=200)
    with pytest.raises(TooLarge, match=r"^zzz\.log: 300 bytes, over the workspace file cap of 200"):
        import_foreign(provider, folder, fmt=None, space="default")
    assert provider.list(OWNER, "/files").entries == []


def test_formats_are_told_apart_by_a_rule_a_person_can_predict(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    plain = tmp_path / "plain"
    (plain / "deep").mkdir(parents=True)
    (plain / "deep" / "a.md").write_text("A")
    (plain / "b.png").write_bytes(b"png")
    memories = tmp_path / "memories"
    (memories / "x").mkdir(parents=True)
    (memories / "x" / "y.md").write_text("Y")
    texts = tmp_path / "texts"
    texts.mkdir()
    (texts / "notes.txt").write_text("T")
    graph = tmp_path / "graph.json"
    graph.write_text('\n{"type":"relation","from":"a","to":"b","relationType":"r"}\n')
    mem0 = tmp_path / "export.json"
    mem0.write_text(json.dumps({"results": [{"id": "1", "memory": "m"}]}))
    single = tmp_path / "One.md"
    single.write_text("One")
    assert [detect(p) for p in (vault, plain, memories, texts, graph, mem0, single)] == [
        "obsidian", "markdown", "claude-memories", "claude-memories", "mcp-memory", "mem0", "markdown"
    ]  # fmt: skip
    empty = tmp_path / "empty"
    (empty / ".hidden").mkdir(parents=True)
    other = tmp_path / "other.json"
    other.write_text('{"entities": 3}')
    for source, why in [(empty, "an empty folder"), (other, "not a format"), (tmp_path / "gone", "no such file")]:
        with pytest.raises(InvalidPath, match=why) as caught:
            detect(source)
        if why != "no such file":
            assert "markdown, obsidian, mcp-memory, mem0, claude-memories" in caught.value.message
    provider = provider_on(tmp_path)
    for source, fmt, why in [
        (vault, "jsonl", "unknown format 'jsonl'"),
        (plain, "mem0", "mem0 takes a JSON file, not a folder"),
        (mem0, "obsidian", "obsidian takes a folder"),
        (tmp_path / "gone", "markdown", "no such file or folder"),
        (mem0, "markdown", "not a Markdown file"),
    ]:
        with pytest.raises(InvalidPath, match=why):
            import_foreign(provider, source, fmt=fmt, space="default")
