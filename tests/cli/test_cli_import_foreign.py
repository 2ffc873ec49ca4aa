"""``afi import PATH`` on what users already have (not an afi bundle): one run of the real command per format."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import afi


def _imported(path: Path, db: Path, *extra: str) -> str:
    done = afi("import", str(path), *extra, db=db)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_import_an_obsidian_vault(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "Deploy.md").write_text("---\ntags: [ops]\n---\nWe deploy with a zebra canary; ask [[Sam]].\n")
    (vault / "Sam.md").write_text("Sam runs the okapi gate.\n")
    db = tmp_path / "afi.db"
    assert "imported 2 notes (1 link) from an Obsidian vault" in _imported(vault, db)
    shown = afi("cat", "/facts/deploy.md", db=db)
    assert shown.returncode == 0 and "zebra canary" in shown.stdout and "- ops" in shown.stdout


def test_import_a_markdown_folder_into_a_space(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "Tapir.md").write_text("Tapirs guard the release gate.\n")
    db = tmp_path / "afi.db"
    assert "imported 1 note (0 links) from a Markdown folder" in _imported(folder, db, "--space", "work")
    assert "Tapirs" in afi("cat", "/facts/tapir.md", "--space", "work", db=db).stdout


def test_import_an_mcp_memory_graph_and_a_broken_one(tmp_path: Path) -> None:
    graph = tmp_path / "memory.jsonl"
    lines = [{"type": "entity", "name": "Ada", "entityType": "person", "observations": ["Writes the gate"]}]
    graph.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    db = tmp_path / "afi.db"
    assert "imported 1 note (0 links) from an MCP memory knowledge graph" in _imported(graph, db)
    assert "Writes the gate" in afi("cat", "/facts/ada.md", db=db).stdout
    broken = tmp_path / "memory.json"
    broken.write_text('{"type":"entity","name":"Bo","entityType":"person","observations":[]}\n{oops\n')
    refused = afi("import", str(broken), "--format", "mcp-memory", db=db)
    assert refused.returncode == 2 and "memory.json line 2: not JSON" in refused.stderr
    assert afi("cat", "/facts/bo.md", db=db).returncode == 2


def test_import_a_mem0_export(tmp_path: Path) -> None:
    export = tmp_path / "mem0.json"
    export.write_text(json.dumps({"results": [{"id": "m1", "memory": "Prefers tea", "categories": ["food"]}]}))
    db = tmp_path / "afi.db"
    assert "imported 1 note (0 links) from a mem0 export" in _imported(export, db)
    assert "Prefers tea" in afi("cat", "/facts/mem0-m1.md", db=db).stdout


def test_import_a_claude_memory_directory(tmp_path: Path) -> None:
    folder = tmp_path / "memories"
    folder.mkdir()
    (folder / "prefs.xml").write_text("<tone>terse</tone>\n")
    db = tmp_path / "afi.db"
    assert "imported 1 file from a Claude memory directory" in _imported(folder, db)
    assert afi("cat", "/files/memories/prefs.xml", db=db).stdout == "<tone>terse</tone>\n"
