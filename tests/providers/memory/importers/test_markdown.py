"""Importing a Markdown folder or an Obsidian vault: notes, tags, links, names, re-imports."""

from __future__ import annotations

from pathlib import Path

import pytest

from afi.errors import InvalidPath, TooLarge
from afi.providers.memory.importers import import_foreign

from .notes import OWNER, links, names, note, provider_on


def _vault(root: Path) -> Path:
    vault = root / "vault"
    for folder in (".obsidian", ".trash", "People", "Work/People", "assets"):
        (vault / folder).mkdir(parents=True, exist_ok=True)
    (vault / ".obsidian" / "app.json").write_text("{}")
    (vault / ".trash" / "Old.md").write_text("thrown away")
    (vault / "assets" / "diagram.png").write_bytes(b"\x89PNG")
    (vault / "Deploy Guide.md").write_text(
        "---\ntags: [ops, '#release']\naliases: Shipping\ncreated: 2024-03-01\nowner: sam\n---\n"
        "We deploy with a zebra canary; ask [[People/Sam|Sam]] or [[Missing Note]].\n"
        "Also [[deploy guide#Top]] and ![[diagram.png]], tagged #prod/eu but not #123 nor `#code`.\n"
        "```\n#include [[Nowhere]]\n```\n"
    )
    (vault / "Rollback.md").write_text(
        "---\ntype: procedure\ntags: ops, rollback\n---\n1. Read [the guide](Deploy%20Guide.md)\n2. Ping [[SAM]]\n"
    )
    (vault / "People" / "Sam.md").write_text("Sam runs the okapi gate; see [[Deploy Guide]].\n")
    (vault / "Work" / "People" / "sam.md").write_text("Another Sam, in the work folder.\n")
    (vault / "Empty.md").write_text("---\ntags: [x]\n---\n\n")
    return vault


def test_an_obsidian_vault_becomes_linked_tagged_notes(tmp_path: Path) -> None:
    provider = provider_on(tmp_path)
    seen: list[tuple[int, int]] = []
    report = import_foreign(provider, _vault(tmp_path), fmt=None, space="default", progress=lambda *a: seen.append(a))
    assert report.format == "obsidian" and (report.created, report.updated, report.unchanged) == (4, 0, 0)
    assert names(provider, "/facts") == ["/facts/deploy-guide.md", "/facts/sam-2.md", "/facts/sam.md"]
    assert names(provider, "/procedures") == ["/procedures/rollback.md"]
    front, body = note(provider, "/facts/deploy-guide.md")
    assert body.startswith("We deploy with a zebra canary; ask [[People/Sam|Sam]]")
    assert front["tags"] == ["ops", "release", "prod/eu"]
    assert front["keywords"] == ["Shipping"] and front["context"] == '{"owner": "sam"}'
    assert front["valid_from"] == "2024-03-01T00:00:00.000Z"
    # Obsidian resolution: by path, else by file name case-insensitively, the shortest path winning
    assert links(provider, "/facts/deploy-guide.md") == {"/facts/sam.md": "links_to"}
    assert links(provider, "/procedures/rollback.md") == {"/facts/deploy-guide.md": "links_to",
                                                          "/facts/sam.md": "links_to"}  # fmt: skip
    assert links(provider, "/facts/sam.md") == {"/facts/deploy-guide.md": "links_to"}
    assert note(provider, "/procedures/rollback.md")[0]["tags"] == ["ops", "rollback"]
    assert note(provider, "/facts/sam-2.md")[1] == "Another Sam, in the work folder.\n"
    assert report.links == 4 and report.unresolved == ["[[Missing Note]] in Deploy Guide.md"]
    assert report.skipped == ["1 file(s) not Markdown: assets/diagram.png", "Empty.md (empty)"]
    assert report.summary() == (
        "imported 4 notes (4 links) from an Obsidian vault; skipped: 1 file(s) not Markdown: assets/diagram.png; "
        "Empty.md (empty); 1 link to nothing imported: [[Missing Note]] in Deploy Guide.md"
    )
    # the notes a batch at a time, a note linking to one of the batch starting the next (Sam links to Deploy
    # Guide, Rollback to Sam; Rollback and the other Sam share one), then Deploy Guide's link forward to Sam
    assert seen == [(0, 5), (1, 5), (2, 5), (4, 5), (5, 5)]
    audit = [row for row in provider.audit_log(limit=50) if row["verb"] in ("remember", "remember_many")]
    assert [row["verb"] for row in audit] == ["remember", "remember_many", "remember_many", "remember_many"]
    assert {row["principal"] for row in audit} == {"local"}


def test_importing_the_same_vault_again_adds_nothing_and_a_changed_note_is_a_new_version(tmp_path: Path) -> None:
    provider = provider_on(tmp_path)
    vault = _vault(tmp_path)
    import_foreign(provider, vault, fmt="obsidian", space="default")
    first = {path: note(provider, path)[0]["id"] for path in names(provider, "/facts")}
    again = import_foreign(provider, vault, fmt="obsidian", space="default")
    assert (again.created, again.updated, again.unchanged) == (0, 0, 4)
    assert {path: note(provider, path)[0]["id"] for path in names(provider, "/facts")} == first
    assert links(provider, "/facts/sam.md") == {"/facts/deploy-guide.md": "links_to"}
    (vault / "People" / "Sam.md").write_text("Sam now runs the tapir gate; see [[Deploy Guide]].\n")
    changed = import_foreign(provider, vault, fmt="obsidian", space="default")
    assert (changed.created, changed.updated, changed.unchanged) == (0, 1, 3)
    front, body = note(provider, "/facts/sam.md")
    assert "tapir" in body and front["supersedes"] == first["/facts/sam.md"]
    assert "valid_from" in front and front["id"] != first["/facts/sam.md"]
    assert b"okapi" in provider.read(OWNER, f"/history/{first['/facts/sam.md']}.md").data
    assert links(provider, "/facts/sam.md") == {"/facts/deploy-guide.md": "links_to"}
    assert len(names(provider, "/facts")) == 3


def test_a_markdown_folder_keeps_notes_over_the_cap_as_files(tmp_path: Path) -> None:
    provider = provider_on(tmp_path)
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("Alpha links to [b](sub/b.md) and [[sub/b]].\n")
    (folder / "sub" / "b.md").write_text("Bravo.\n")
    (folder / "long.md").write_text("word " * 1000)
    report = import_foreign(provider, folder, fmt=None, space="default")
    assert report.format == "markdown" and report.label == "a Markdown folder"
    assert names(provider, "/facts") == ["/facts/a.md", "/facts/b.md"]
    assert links(provider, "/facts/a.md") == {"/facts/b.md": "links_to"}
    assert provider.read(OWNER, "/files/notes/long.md").data == b"word " * 1000
    assert provider.fabric("default").find_file("notes/long.md") is not None  # its file note makes it recallable
    assert report.files_written == 1
    assert "long.md (5000 characters, over the 4000-character note cap" in report.skipped[0]
    assert report.summary().startswith("imported 2 notes (1 link) and 1 file from a Markdown folder")


def test_a_bad_note_anywhere_leaves_nothing_imported(tmp_path: Path) -> None:
    provider = provider_on(tmp_path)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("Fine.\n")
    (folder / "z.md").write_text("---\ntags: [unclosed\n---\nBody\n")
    with pytest.raises(InvalidPath, match=r"^z\.md line 2: the front matter is not valid YAML"):
        import_foreign(provider, folder, fmt=None, space="default")
    (folder / "z.md").write_bytes(b"caf\xe9\n")
    with pytest.raises(InvalidPath, match=r"^z\.md: not UTF-8 text"):
        import_foreign(provider, folder, fmt=None, space="default")
    (folder / "z.md").write_text("---\nvalid: yes\nBody without a closing line\n")
    with pytest.raises(InvalidPath, match="no closing '---'"):
        import_foreign(provider, folder, fmt=None, space="default")
    assert names(provider, "/facts") == [] and provider.audit_log() == []


def test_a_note_the_store_refuses_is_named_before_anything_is_written(tmp_path: Path) -> None:
    provider = provider_on(tmp_path)
    folder = tmp_path / "vault"
    (folder / ".obsidian").mkdir(parents=True)
    (folder / "a.md").write_text("Fine.\n")
    (folder / "b.md").write_text("x" * 5000)
    provider.workspace_limits = type(provider.workspace_limits)(max_file_bytes=100)
    with pytest.raises(TooLarge, match=r"^b\.md: 4\.9 KiB \(5,000 bytes\), over the workspace file cap of 100 bytes"):
        import_foreign(provider, folder, fmt=None, space="default")
    assert names(provider, "/facts") == []
