"""Hostile foreign sources through the real ``afi import``: symbolic and hard links out of a vault or a
``/memories`` folder, ``../`` links, YAML bombs and deep nesting in front matter, deeply nested JSON
(mem0, MCP memory), invalid UTF-8, a sparse file past the file cap, a note past the note cap.

Each source is either refused (exit 2, an AfiError naming the file, no traceback, the store as
before) or imported without reading anything outside the source. Figures: every case tried, failures
listed (zero), and each run bounded in time (a bomb must not hang the import).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.test_bundle import _counts
from tests.support.cli import afi

SECRET = "TOP-SECRET-okapi-7731"
Case = Callable[[Path, Path], tuple[Path, str | None]]  # (folder, outside) -> (source, what a refusal says)


def _vault(folder: Path) -> Path:
    vault = folder / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "Deploy.md").write_text("We deploy with a zebra canary.\n")
    return vault


def _symlinked_note(folder: Path, outside: Path) -> tuple[Path, str | None]:
    vault = _vault(folder)
    (outside / "secret.md").write_text(f"{SECRET}\n")
    (vault / "Secret.md").symlink_to(outside / "secret.md")
    return vault, None


def _symlinked_folder(folder: Path, outside: Path) -> tuple[Path, str | None]:
    vault = _vault(folder)
    (outside / "deep").mkdir()
    (outside / "deep" / "inside.md").write_text(f"{SECRET}\n")
    (vault / "linked").symlink_to(outside / "deep")
    return vault, None


def _symlinked_markdown_folder(folder: Path, outside: Path) -> tuple[Path, str | None]:
    notes = folder / "notes"
    notes.mkdir()
    (notes / "real.md").write_text("a real note\n")
    (outside / "passwd").write_text(f"root:x:0:0:{SECRET}\n")
    (notes / "passwd.md").symlink_to(outside / "passwd")
    return notes, None


def _hardlinked_note(folder: Path, outside: Path) -> tuple[Path, str | None]:
    vault = _vault(folder)
    (outside / "secret.md").write_text(f"{SECRET}\n")
    os.link(outside / "secret.md", vault / "Secret.md")
    return vault, None


def _hardlinked_memory(folder: Path, outside: Path) -> tuple[Path, str | None]:
    memories = folder / "memories"
    memories.mkdir()
    (memories / "prefs.xml").write_text("<tone>terse</tone>\n")
    (outside / "id_rsa").write_text(f"{SECRET}\n")
    os.link(outside / "id_rsa", memories / "key.txt")
    return memories, None


def _sparse_note(folder: Path, outside: Path) -> tuple[Path, str | None]:
    vault = _vault(folder)
    with open(vault / "Huge.md", "wb") as f:
        f.truncate(int(1.1 * (1 << 30)))  # holes: no disk used, but 1.1 GiB as it reads
    return vault, "Huge.md"


def _huge_mem0(folder: Path, outside: Path) -> tuple[Path, str | None]:
    source = folder / "mem0.json"
    source.write_text(json.dumps([{"id": "m1", "memory": "y" * 50_000_000}]))
    return source, "mem0.json record 1"


def _dotdot_links(folder: Path, outside: Path) -> tuple[Path, str | None]:
    vault = _vault(folder)
    (outside / "target.md").write_text(f"{SECRET}\n")
    (vault / "Links.md").write_text("see [[../outside/target]] and [t](../outside/target.md) and [[/etc/passwd]]\n")
    return vault, None


def _yaml_bomb(folder: Path, outside: Path) -> tuple[Path, str | None]:
    vault = _vault(folder)
    levels = ["&a0 [x, x, x, x, x, x, x, x, x]"] + [f"&a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 10)]
    (vault / "Bomb.md").write_text(f"---\nextra: [{', '.join(levels)}]\n---\nboom\n")
    return vault, "Bomb.md"


def _yaml_deep(folder: Path, outside: Path) -> tuple[Path, str | None]:
    vault = _vault(folder)
    (vault / "Deep.md").write_text("---\nextra: " + "[" * 5000 + "]" * 5000 + "\n---\ndeep\n")
    return vault, "Deep.md"


def _yaml_deep_block(folder: Path, outside: Path) -> tuple[Path, str | None]:
    vault = _vault(folder)
    lines = [f"{'  ' * n}k{n}:" for n in range(3000)]
    (vault / "Block.md").write_text("---\n" + "\n".join(lines) + " x\n---\ndeep\n")
    return vault, "Block.md"


def _invalid_utf8(folder: Path, outside: Path) -> tuple[Path, str | None]:
    vault = _vault(folder)
    (vault / "Bad.md").write_bytes(b"caf\xe9 au lait\n")
    return vault, "Bad.md"


def _deep_json(name: str, fmt: str | None) -> Case:
    def case(folder: Path, outside: Path) -> tuple[Path, str | None]:
        source = folder / name
        source.write_bytes(b"[" * 1_000_000 + b"]" * 1_000_000)
        return source, name

    return case


def _deep_mem0_record(folder: Path, outside: Path) -> tuple[Path, str | None]:
    source = folder / "mem0.json"
    source.write_text('[{"id": "m1", "memory": "x", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}]")
    return source, "mem0.json"


def _deep_mcp_line(folder: Path, outside: Path) -> tuple[Path, str | None]:
    source = folder / "memory.jsonl"
    ok = json.dumps({"type": "entity", "name": "Ada", "entityType": "person", "observations": ["hi"]})
    source.write_text(ok + '\n{"type": "entity", "name": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    return source, "memory.jsonl line 2"


CASES: dict[str, tuple[Case, tuple[str, ...]]] = {
    "vault: a note symlinked outside": (_symlinked_note, ()),
    "vault: a folder symlinked outside": (_symlinked_folder, ()),
    "markdown: a .md symlink to a passwd file": (_symlinked_markdown_folder, ()),
    "vault: a note hard-linked to a file outside": (_hardlinked_note, ()),
    "memories: a file hard-linked to one outside": (_hardlinked_memory, ()),
    "vault: a sparse note of 1.1 GiB": (_sparse_note, ()),
    "mem0: a memory of 50,000,000 characters": (_huge_mem0, ("--format", "mem0")),
    "vault: ../ in links": (_dotdot_links, ()),
    "vault: YAML alias bomb": (_yaml_bomb, ()),
    "vault: YAML nested 5000 deep (flow)": (_yaml_deep, ()),
    "vault: YAML nested 3000 deep (block)": (_yaml_deep_block, ()),
    "vault: invalid UTF-8": (_invalid_utf8, ()),
    "mem0: a million nested arrays (detected)": (_deep_json("mem0.json", None), ()),
    "mem0: a million nested arrays (--format)": (_deep_json("mem0.json", "mem0"), ("--format", "mem0")),
    "mem0: a deep metadata value": (_deep_mem0_record, ("--format", "mem0")),
    "mcp-memory: a deep line": (_deep_mcp_line, ()),
    "mcp-memory: a million nested arrays": (_deep_json("graph.jsonl", "mcp-memory"), ("--format", "mcp-memory")),
}


def _store_text(db: Path) -> str:
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT content FROM notes").fetchall()
        rows += conn.execute("SELECT text FROM workspace_files").fetchall()
    return "\n".join(str(r[0]) for r in rows)


@pytest.mark.slow
def test_hostile_foreign_sources_are_refused_or_read_only_inside(tmp_path: Path) -> None:
    failures: list[str] = []
    for n, (name, (case, extra)) in enumerate(CASES.items()):
        folder, outside = tmp_path / f"case{n}", tmp_path / f"case{n}-outside"
        folder.mkdir()
        outside.mkdir()
        source, refusal = case(folder, outside)
        db = folder / "afi.db"
        assert afi("remember", "fact", "the store had this before", "--name", "kept", db=db).returncode == 0
        before = _counts(str(db))
        before.pop("audit")
        outside_before = sorted(os.listdir(outside))
        try:
            done = afi("import", str(source), *extra, db=db)
        except Exception as err:
            failures.append(f"{name}: {type(err).__name__}")
            continue
        if "Traceback" in done.stderr:
            failures.append(f"{name}: traceback: {done.stderr.strip().splitlines()[-1][:200]}")
        elif refusal is not None:
            after = _counts(str(db))
            after.pop("audit")
            if done.returncode != 2 or refusal not in done.stderr:
                failures.append(f"{name}: exit {done.returncode}, said {done.stderr.strip()[-300:]!r}")
            elif after != before:
                failures.append(f"{name}: refused but the store changed")
        elif done.returncode not in (0, 2):
            failures.append(f"{name}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
        if SECRET in _store_text(db):
            failures.append(f"{name}: read a file outside the source into the store")
        if sorted(os.listdir(outside)) != outside_before:
            failures.append(f"{name}: wrote outside the source")
    assert failures == [], f"{len(CASES)} hostile sources tried, {len(failures)} failures:\n" + "\n".join(failures)
