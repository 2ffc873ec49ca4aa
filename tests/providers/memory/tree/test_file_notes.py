"""Which workspace files are notes (text a person would recall) and what tree searches answer, on each engine.

Every file stays stored, listed and greppable; binaries, empty files and ignored paths (``.git/`` and
the like by default, plus a gitignore-style ``/files/.afiignore``) are not notes, so semantic recall
never answers with them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from afi.errors import InvalidPath, NotFound
from afi.model import SearchRequest, SemanticQuery
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider

OWNER = Caller(principal="local", space="default")


def file_notes(provider: MemoryProvider) -> dict[str, str]:
    """The active file notes of the default space: path → content."""
    notes = provider.fabric("default").notes(kinds=["file"])
    return {n.path: n.content for n in notes if n.status == "active" and n.path is not None}


def semantic_paths(provider: MemoryProvider, question: str, path: str = "/") -> list[str]:
    page = provider.search(OWNER, SearchRequest(query=SemanticQuery(semantic=question), path=path, limit=50))
    return [m.path for m in page.matches]


def test_a_git_repository_in_the_workspace_makes_no_notes(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/files/app/deploy.md", b"how do we deploy: canary first, then everywhere\n")
    for name, data in {
        ".git/config": b"[core]\n\trepositoryformatversion = 0\n# deploy deploy deploy\n",
        ".git/HEAD": b"ref: refs/heads/main\n",
        ".git/hooks/pre-commit.sample": b"#!/bin/sh\n# how do we deploy\n",
        ".git/objects/ab/cdef": bytes(range(256)),
        "node_modules/x/index.js": b"// how do we deploy\n",
        "notes.md.swp": b"how do we deploy\n",
    }.items():
        provider.write(OWNER, f"/files/app/{name}", data)
    assert set(file_notes(provider)) == {"app/deploy.md"}
    assert semantic_paths(provider, "how do we deploy") == ["/files/app/deploy.md"]
    # still stored, listed and greppable
    assert provider.read(OWNER, "/files/app/.git/config").data.startswith(b"[core]")
    assert ".git" in [e.path.rsplit("/", 1)[1] for e in provider.list(OWNER, "/files/app").entries]
    grep = provider.search(OWNER, SearchRequest.model_validate({"query": "repositoryformatversion", "path": "/"}))
    assert [m.path for m in grep.matches] == ["/files/app/.git/config"]


def test_binary_and_empty_files_are_not_notes_and_a_file_that_turns_binary_leaves_recall(
    provider: MemoryProvider,
) -> None:
    provider.write(OWNER, "/files/logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    provider.write(OWNER, "/files/latin1.txt", "café au lait".encode("latin-1"))
    provider.write(OWNER, "/files/empty.txt", b"")
    provider.write(OWNER, "/files/blank.txt", b"  \n\t\n")
    assert file_notes(provider) == {}
    provider.write(OWNER, "/files/report.txt", b"quarterly zebra report\n")
    assert semantic_paths(provider, "zebra report") == ["/files/report.txt"]
    provider.write(OWNER, "/files/report.txt", b"\x00\x01binary now")
    assert file_notes(provider) == {} and semantic_paths(provider, "zebra report") == []


def test_afiignore_leaves_paths_out_and_a_bang_line_brings_a_default_back(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/files/build/out.txt", b"zebra build output\n")
    provider.write(OWNER, "/files/src/main.txt", b"zebra source\n")
    provider.write(OWNER, "/files/.git/description", b"zebra repository description\n")
    assert set(file_notes(provider)) == {"build/out.txt", "src/main.txt"}
    # ignoring a folder retires the notes already made for it; the .afiignore itself is no note
    provider.write(OWNER, "/files/.afiignore", b"# generated\nbuild/\n!.git/\n!.git/description\n")
    assert set(file_notes(provider)) == {"src/main.txt"}
    provider.write(OWNER, "/files/build/again.txt", b"zebra again\n")
    provider.write(OWNER, "/files/.git/description", b"zebra repository, described again\n")
    assert set(file_notes(provider)) == {"src/main.txt", ".git/description"}
    assert "/files/build/again.txt" not in semantic_paths(provider, "zebra")


def test_a_move_into_and_out_of_an_ignored_path_follows_the_rules(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/files/plan.md", b"zebra migration plan\n")
    provider.move(OWNER, "/files/plan.md", "/files/node_modules/plan.md")
    assert file_notes(provider) == {}
    provider.move(OWNER, "/files/node_modules/plan.md", "/files/docs/plan.md")
    assert file_notes(provider) == {"docs/plan.md": "zebra migration plan\n"}
    assert semantic_paths(provider, "zebra migration") == ["/files/docs/plan.md"]


def test_an_overwriting_move_and_a_folder_delete_leave_no_note_behind(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/files/d/cfg", b"zebra one\n")
    provider.write(OWNER, "/files/d/cfg.lock", b"zebra two\n")
    provider.move(OWNER, "/files/d/cfg.lock", "/files/d/cfg", overwrite=True)
    assert file_notes(provider) == {"d/cfg": "zebra two\n"}
    provider.delete(OWNER, "/files/d", recursive=True)
    assert file_notes(provider) == {} and semantic_paths(provider, "zebra") == []


def test_a_tree_search_covers_procedures_and_answers_each_hit_once(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/procedures/deploy.md", b"To deploy: build, push the zebra image, roll out.\n")
    provider.write(OWNER, "/facts/owner.md", b"The zebra service is owned by the platform team.\n")
    assert "/procedures/deploy.md" in semantic_paths(provider, "how do we deploy the zebra image")
    exact = provider.search(OWNER, SearchRequest.model_validate({"query": "zebra", "path": "/"}))
    assert sorted(m.path for m in exact.matches) == ["/facts/owner.md", "/procedures/deploy.md"]
    history = provider.search(OWNER, SearchRequest.model_validate({"query": "zebra", "path": "/history"}))
    assert len(history.matches) == 2 and all(m.path.startswith("/history/") for m in history.matches)


def test_a_semantic_hit_names_the_line_exact_search_names(provider: MemoryProvider) -> None:
    text = "".join(f"line {i} of filler text\n" for i in range(1, 10)) + "the zebra crossing is on line ten\n"
    provider.write(OWNER, "/facts/crossing.md", text.encode())
    provider.write(OWNER, "/files/crossing.txt", text.encode())
    exact = provider.search(OWNER, SearchRequest.model_validate({"query": "zebra crossing", "path": "/"}))
    lines = {m.path: m.line for m in exact.matches}
    assert lines["/files/crossing.txt"] == 10 and lines["/facts/crossing.md"] > 10  # after the front matter
    page = provider.search(OWNER, SearchRequest(query=SemanticQuery(semantic="where is the zebra crossing")))
    semantic = {m.path: (m.line, m.text) for m in page.matches}
    for path, line in lines.items():
        assert semantic[path] == (line, "the zebra crossing is on line ten"), path


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"build/\n!\n", "line 2 of .afiignore ('!') is not a gitignore pattern"),
        (b"ok/\na\\\n", "line 2 of .afiignore ('a\\\\') is not a gitignore pattern"),
        (b"\\\n", "line 1 of .afiignore"),
        (b"x\x00y\n", "holds a NUL byte"),
        (b"#" * (64 * 1024 + 1), "at most 64 KiB"),
    ],
)
def test_an_afiignore_that_is_not_patterns_is_refused_and_nothing_is_written(
    provider: MemoryProvider, body: bytes, said: str
) -> None:
    with pytest.raises(InvalidPath, match=re.escape(said)):
        provider.write(OWNER, "/files/.afiignore", body)
    with pytest.raises(NotFound):
        provider.stat(OWNER, "/files/.afiignore")
    provider.write(OWNER, "/files/.afiignore", b"build/\n")
    with pytest.raises(InvalidPath, match="line 2"):
        provider.write(OWNER, "/files/.afiignore", b"!\n", append=True)  # an append is checked as the whole file
    assert provider.read(OWNER, "/files/.afiignore").data == b"build/\n"


def test_hostile_afiignore_lines_edited_on_disk_are_skipped_not_fatal(provider: MemoryProvider, tmp_path: Path) -> None:
    provider.write(OWNER, "/files/src/main.txt", b"zebra source\n")  # makes the space's folder
    lines = ["!", "a\\", "[[:alpha:]]", "\\", "build/", "[", "***/x", "\x7f" * 300, "**/" * 200 + "z"]
    (tmp_path / "files" / "default" / ".afiignore").write_text("\n".join(lines) + "\n", encoding="utf-8")
    provider.write(OWNER, "/files/build/out.txt", b"zebra build output\n")  # the valid 'build/' still holds
    provider.write(OWNER, "/files/src/other.txt", b"zebra other\n")
    assert set(file_notes(provider)) == {"src/main.txt", "src/other.txt"}
