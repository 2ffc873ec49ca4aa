"""The memory provider's tree: every verb on every area, successes and refusals, on real disk and each store engine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from afi.errors import Conflict, Forbidden, InvalidPath, NotFound, Unsupported
from afi.model import Entry, RegexQuery, SearchRequest, SemanticQuery
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider

OWNER = Caller(principal="local", space="default")
READER = Caller(principal="reader", space="default", scopes=frozenset({"afi:read"}))
OTHER = Caller(principal="other", space="other")


def names(entries: list[Entry]) -> list[str]:
    return [e.path.rsplit("/", 1)[-1] for e in entries]


def test_root_lists_the_fixed_tree_in_path_order(provider: MemoryProvider) -> None:
    page = provider.list(OWNER, "/")
    assert names(page.entries) == [".afi", "episodes", "facts", "files", "history", "procedures", "sessions", "working"]
    assert all(e.type == "directory" and e.content_type == "inode/directory" for e in page.entries)
    assert provider.stat(OWNER, "/").type == "directory"


def test_manifest_is_a_readable_file(provider: MemoryProvider) -> None:
    entry = provider.stat(OWNER, "/.afi/manifest.json")
    assert entry.type == "file" and entry.content_type == "application/json"
    data = provider.read(OWNER, "/.afi/manifest.json").data
    assert b'"afi_version": "0.1"' in data
    assert entry.size == len(data)
    with pytest.raises(Forbidden):
        provider.write(OWNER, "/.afi/manifest.json", b"{}")


def test_a_written_fact_reads_back_with_front_matter(provider: MemoryProvider) -> None:
    entry = provider.write(OWNER, "/facts/units.md", b"---\ntags: [prefs]\n---\nUser prefers metric units\n")
    assert entry.path == "/facts/units.md" and entry.type == "file" and entry.etag
    text = provider.read(OWNER, "/facts/units.md").data.decode()
    assert text.startswith("---\n") and "kind: fact" in text and "- prefs" in text
    assert text.endswith("---\nUser prefers metric units\n")
    assert names(provider.list(OWNER, "/facts").entries) == ["units.md"]
    note_id = provider.stat(OWNER, "/facts/units.md").attributes["x-id"]
    assert provider.read(OWNER, f"/history/{note_id}.md").data.decode() == text


def test_rewriting_a_fact_supersedes_and_keeps_history(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/facts/units.md", b"User prefers metric units")
    first = provider.stat(OWNER, "/facts/units.md").attributes["x-id"]
    provider.write(OWNER, "/facts/units.md", b"User prefers imperial units now")
    second = provider.stat(OWNER, "/facts/units.md")
    assert second.attributes["x-id"] != first
    assert "imperial" in provider.read(OWNER, "/facts/units.md").data.decode()
    history = names(provider.list(OWNER, "/history").entries)
    assert f"{first}.md" in history and f"{second.attributes['x-id']}.md" in history
    old = provider.read(OWNER, f"/history/{first}.md").data.decode()
    assert "valid_to:" in old and "metric" in old
    assert f"supersedes: {first}" in provider.read(OWNER, "/facts/units.md").data.decode()


def test_round_trip_of_a_read_note_does_not_fork_it(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/facts/a.md", b"first version of a")
    provider.write(OWNER, "/facts/a.md", b"second version of a, quite different")
    text = provider.read(OWNER, "/facts/a.md").data
    before = provider.stat(OWNER, "/facts/a.md").attributes["x-id"]
    provider.write(OWNER, "/facts/a.md", text)  # cat > edit (nothing) > write
    assert names(provider.list(OWNER, "/facts").entries) == ["a.md"]
    assert provider.stat(OWNER, "/facts/a.md").attributes["x-id"] == before
    assert provider.read(OWNER, "/facts/a.md").data.endswith(b"---\nsecond version of a, quite different\n")
    assert len(provider.list(OWNER, "/history").entries) == 2


def test_unknown_front_matter_is_refused_and_nothing_written(provider: MemoryProvider) -> None:
    with pytest.raises(InvalidPath, match="unknown front-matter"):
        provider.write(OWNER, "/facts/x.md", b"---\ncolour: red\n---\nbody")
    with pytest.raises(InvalidPath):
        provider.write(OWNER, "/facts/x.md", b"---\nimportance: 3\n---\nbody")
    assert provider.list(OWNER, "/facts").entries == []
    assert provider.list(OWNER, "/history").entries == []


@pytest.mark.parametrize(
    ("path", "error"),
    [
        pytest.param("/facts/x.txt", InvalidPath, id="not-md"),
        pytest.param("/facts/a/b.md", InvalidPath, id="nested"),
        pytest.param("/history/abc.md", Forbidden, id="history-read-only"),
        pytest.param("/episodes/abc.md", Forbidden, id="episodes-read-only"),
        pytest.param("/facts", Forbidden, id="area-itself"),
        pytest.param("/nowhere/x.md", Unsupported, id="no-area"),
    ],
)
def test_bad_note_writes_are_refused(provider: MemoryProvider, path: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        provider.write(OWNER, path, b"text")


def test_create_only_and_if_match(provider: MemoryProvider) -> None:
    entry = provider.write(OWNER, "/facts/p.md", b"one", create_only=True)
    with pytest.raises(Conflict):
        provider.write(OWNER, "/facts/p.md", b"two", create_only=True)
    with pytest.raises(Conflict):
        provider.write(OWNER, "/facts/p.md", b"two", if_match='"stale"')
    after = provider.write(OWNER, "/facts/p.md", b"two different", if_match=entry.etag)
    assert after.etag != entry.etag
    f1 = provider.write(OWNER, "/files/a.txt", b"x")
    with pytest.raises(Conflict):
        provider.write(OWNER, "/files/a.txt", b"y", if_match='"nope"')
    assert provider.write(OWNER, "/files/a.txt", b"yy", if_match=f1.etag).size == 2


def test_delete_is_forget(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/facts/gone.md", b"to be forgotten")
    assert provider.delete(OWNER, "/facts/gone.md").deleted == 1
    with pytest.raises(NotFound):
        provider.stat(OWNER, "/facts/gone.md")
    with pytest.raises(NotFound):
        provider.delete(OWNER, "/facts/gone.md")
    assert provider.list(OWNER, "/history").entries == []


def test_working_blocks(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/working/core.md", b"Prefers terse output")
    provider.write(OWNER, "/working/core.md", b"and tables", append=True)  # after the text as it reads
    text = provider.read(OWNER, "/working/core.md").data.decode()
    assert text.endswith("Prefers terse output\nand tables\n")
    assert names(provider.list(OWNER, "/working").entries) == ["core.md"]
    with pytest.raises(InvalidPath):
        provider.write(OWNER, "/working/Bad Label.md", b"x")
    provider.delete(OWNER, "/working/core.md")
    assert provider.list(OWNER, "/working").entries == []


@pytest.mark.parametrize(
    "front",
    ["tags: [a, b]", "tags: 5", "keywords: [k]", "context: why", "valid_to: 2030-01-01", "importance: lots"],
)
def test_a_working_block_refuses_the_fields_it_cannot_keep(provider: MemoryProvider, front: str) -> None:
    """Fields a block does not keep were dropped while the write said it was stored: now refused."""
    provider.write(OWNER, "/working/core.md", b"kept as it was")
    with pytest.raises(InvalidPath) as refused:
        provider.write(OWNER, "/working/core.md", f"---\n{front}\n---\nnew text".encode())
    assert front.split(":")[0] in refused.value.message
    assert provider.read(OWNER, "/working/core.md").data.decode().endswith("kept as it was\n")
    provider.write(OWNER, "/working/core.md", b"---\nimportance: 0.4\n---\nnew text")
    assert "importance: 0.4" in provider.read(OWNER, "/working/core.md").data.decode()


def test_workspace_files(provider: MemoryProvider, tmp_path: Path) -> None:
    provider.mkdir(OWNER, "/files/docs")
    with pytest.raises(Conflict):
        provider.mkdir(OWNER, "/files/docs")
    with pytest.raises(NotFound):
        provider.mkdir(OWNER, "/files/a/b/c")
    provider.mkdir(OWNER, "/files/a/b/c", parents=True)
    provider.write(OWNER, "/files/docs/readme.md", b"hello\nworld\n")
    assert (tmp_path / "files" / "default" / "docs" / "readme.md").read_bytes() == b"hello\nworld\n"
    provider.write(OWNER, "/files/docs/readme.md", b"again\n", append=True)
    provider.write(OWNER, "/files/docs/readme.md", b"J", offset=0)
    provider.write(OWNER, "/files/docs/new.log", b"first line\n", append=True)
    assert provider.read(OWNER, "/files/docs/new.log").data == b"first line\n"
    assert provider.read(OWNER, "/files/docs/readme.md").data == b"Jello\nworld\nagain\n"
    part = provider.read(OWNER, "/files/docs/readme.md", offset=6, length=5)
    assert part.data == b"world" and not part.eof
    past = provider.read(OWNER, "/files/docs/readme.md", offset=10_000)
    assert past.data == b"" and past.eof
    assert names(provider.list(OWNER, "/files").entries) == ["a", "docs"]
    assert names(provider.list(OWNER, "/files/docs").entries) == ["new.log", "readme.md"]
    with pytest.raises(InvalidPath):
        provider.list(OWNER, "/files/docs/readme.md")
    with pytest.raises(InvalidPath):
        provider.read(OWNER, "/files/docs")
    with pytest.raises(Unsupported):
        provider.mkdir(OWNER, "/facts/sub")


def test_moves_repoint_the_file_note(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/files/a.md", b"canary rollout plan")
    provider.write(OWNER, "/files/b.md", b"other")
    with pytest.raises(Conflict):
        provider.move(OWNER, "/files/a.md", "/files/b.md")
    entry = provider.move(OWNER, "/files/a.md", "/files/c.md")
    assert entry.path == "/files/c.md"
    with pytest.raises(NotFound):
        provider.stat(OWNER, "/files/a.md")
    hits = provider.search(OWNER, SearchRequest(query=SemanticQuery(semantic="canary rollout plan"), path="/files"))
    assert [m.path for m in hits.matches][:1] == ["/files/c.md"]
    provider.move(OWNER, "/files/c.md", "/files/b.md", overwrite=True)
    assert provider.read(OWNER, "/files/b.md").data == b"canary rollout plan"


def test_delete_folders(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/files/d/x.txt", b"x")
    with pytest.raises(Conflict):
        provider.delete(OWNER, "/files/d")
    assert provider.delete(OWNER, "/files/d", recursive=True).deleted == 1
    with pytest.raises(NotFound):
        provider.stat(OWNER, "/files/d")


def test_symlinks_out_of_the_jail_are_refused(provider: MemoryProvider, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    provider.mkdir(OWNER, "/files/x")
    os.symlink(secret, tmp_path / "files" / "default" / "link")
    assert provider.stat(OWNER, "/files/link").type == "symlink"
    with pytest.raises(InvalidPath, match="symlink"):
        provider.read(OWNER, "/files/link")
    with pytest.raises(InvalidPath, match="symlink"):
        provider.write(OWNER, "/files/link", b"overwrite")
    assert secret.read_text() == "top secret"
    found = provider.search(OWNER, SearchRequest(query="top secret"))
    assert found.matches == []


def test_scopes_are_enforced(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/facts/a.md", b"visible")
    assert provider.read(READER, "/facts/a.md").data
    for call in (
        lambda: provider.write(READER, "/facts/b.md", b"x"),
        lambda: provider.mkdir(READER, "/files/x"),
        lambda: provider.delete(READER, "/facts/a.md"),
        lambda: provider.move(READER, "/facts/a.md", "/facts/c.md"),
    ):
        with pytest.raises(Forbidden, match="afi:write"):
            call()
    assert [row["result"] for row in provider.audit_log()][:4] == ["forbidden"] * 4


def test_other_spaces_are_cloaked(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/facts/secret.md", b"the launch code is 1234")
    provider.write(OWNER, "/files/plan.txt", b"the launch code is 1234")
    for path in ("/facts/secret.md", "/files/plan.txt"):
        with pytest.raises(NotFound):
            provider.stat(OTHER, path)
        with pytest.raises(NotFound):
            provider.read(OTHER, path)
    assert provider.list(OTHER, "/facts").entries == []
    assert provider.list(OTHER, "/files").entries == []
    assert provider.search(OTHER, SearchRequest(query="launch code")).matches == []
    semantic = provider.search(OTHER, SearchRequest(query=SemanticQuery(semantic="launch code")))
    assert semantic.matches == []


def test_list_paging_and_glob(provider: MemoryProvider) -> None:
    for i in range(7):
        provider.write(OWNER, f"/facts/n{i}.md", f"note number {i} about topic {i * 7919}".encode())
    seen: list[str] = []
    cursor = None
    while True:
        page = provider.list(OWNER, "/facts", limit=3, cursor=cursor)
        seen += names(page.entries)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"n{i}.md" for i in range(7)]
    assert names(provider.list(OWNER, "/facts", glob="n[12].md").entries) == ["n1.md", "n2.md"]
    assert names(provider.list(OWNER, "/facts", glob="n[!12]*").entries) == [
        "n0.md",
        "n3.md",
        "n4.md",
        "n5.md",
        "n6.md",
    ]
    with pytest.raises(InvalidPath):
        provider.list(OWNER, "/facts", limit=0)
    with pytest.raises(InvalidPath):
        provider.list(OWNER, "/facts", cursor="garbage!")


def test_exact_and_regex_search(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/facts/deploy.md", b"Deploy via canary first\nthen watch the dashboard")
    provider.write(OWNER, "/files/notes/ops.txt", b"line one\nthe canary is yellow\nline three\n")
    page = provider.search(OWNER, SearchRequest(query="canary"))
    paths = [(m.path, m.line) for m in page.matches]
    assert paths == sorted(paths)
    assert ("/files/notes/ops.txt", 2) in paths
    assert any(p == "/facts/deploy.md" for p, _ in paths)
    ops = next(m for m in page.matches if m.path == "/files/notes/ops.txt")
    assert ops.column == 5 and ops.text == "the canary is yellow" and ops.score is None
    assert provider.search(OWNER, SearchRequest(query="CANARY")).matches == []
    regex = provider.search(OWNER, SearchRequest(query=RegexQuery(regex="CANARY\\s+is", flags="i"), path="/files"))
    assert [(m.path, m.line) for m in regex.matches] == [("/files/notes/ops.txt", 2)]
    with_ctx = provider.search(
        OWNER, SearchRequest.model_validate({"query": "yellow", "x-context": 1, "path": "/files"})
    )
    assert with_ctx.matches[0].context is not None
    assert with_ctx.matches[0].context.before == ["line one"]
    assert with_ctx.matches[0].context.after == ["line three"]
    with pytest.raises(InvalidPath, match="regex"):
        provider.search(OWNER, SearchRequest(query=RegexQuery(regex="(unclosed")))
    with pytest.raises(InvalidPath):
        provider.search(OWNER, SearchRequest(query="x", limit=-1))


def test_search_pages_in_path_line_order(provider: MemoryProvider) -> None:
    for i in range(5):
        provider.write(OWNER, f"/files/f{i}.txt", b"needle\nhay\nneedle again\n")
    collected: list[tuple[str, int]] = []
    cursor = None
    while True:
        page = provider.search(OWNER, SearchRequest(query="needle", path="/files", limit=3, cursor=cursor))
        collected += [(m.path, m.line) for m in page.matches]
        cursor = page.next_cursor
        if not cursor:
            break
    assert collected == [(f"/files/f{i}.txt", line) for i in range(5) for line in (1, 3)]


def test_files_edited_on_disk_are_found(provider: MemoryProvider, tmp_path: Path) -> None:
    provider.list(OWNER, "/files")
    folder = tmp_path / "files" / "default"  # made by a space's first write; here a person makes it
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "outside.txt").write_text("edited behind our back: zebra\n")
    provider._space("default").workspace.refresh(force=True)
    page = provider.search(OWNER, SearchRequest(query="zebra"))
    assert [m.path for m in page.matches] == ["/files/outside.txt"]


def test_semantic_search_is_ranked_and_explained(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/facts/units.md", b"User prefers metric units")
    provider.write(OWNER, "/facts/dash.md", b"Rollout health lives on the deploy dashboard")
    page = provider.search(OWNER, SearchRequest(query=SemanticQuery(semantic="preferred metric units")))
    assert page.matches[0].path == "/facts/units.md"
    scores = [m.score for m in page.matches]
    assert all(s is not None and 0 <= s <= 1 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert page.matches[0].x_explain is not None and "similarity" in page.matches[0].x_explain
    assert page.matches[0].x_explain["adjacent"] == 0.0  # written through the tree: no t_ref, no run
    assert "dated" not in page.matches[0].x_explain  # the query names no time
    dated = provider.search(OWNER, SearchRequest(query=SemanticQuery(semantic="preferred metric units in 2001")))
    why = dated.matches[0].x_explain or {}
    assert why["dated"] < 0  # written now, not in 2001: the date signal lowered it
    high = provider.search(OWNER, SearchRequest(query=SemanticQuery(semantic="preferred metric units", threshold=0.99)))
    assert len(high.matches) < len(page.matches)


def test_top_level_folders_are_fixed(provider: MemoryProvider) -> None:
    with pytest.raises(Conflict):
        provider.mkdir(OWNER, "/files")
    with pytest.raises(Unsupported):
        provider.mkdir(OWNER, "/newtop")
    with pytest.raises(Forbidden):
        provider.delete(OWNER, "/facts", recursive=True)
    provider.write(OWNER, "/facts/a.md", b"alpha")
    assert provider.list(OWNER, "/history").entries[0].attributes["permissions"] == "r"
    assert provider.stat(OWNER, "/facts/a.md").attributes["permissions"] == "rw"


def test_manifest_follows_keys_created_while_serving(provider: MemoryProvider) -> None:
    from afi.auth.keys import KeyStore

    assert provider.manifest().auth["required"] is False
    KeyStore(provider.db).create(space="default", scopes=("afi:read",))
    assert provider.manifest().auth["required"] is True


def test_grep_sees_writes_made_between_searches_and_pages(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/facts/a.md", b"zebra one")
    assert [m.path for m in provider.search(OWNER, SearchRequest(query="zebra", path="/facts")).matches] == [
        "/facts/a.md"
    ]
    provider.write(OWNER, "/facts/b.md", b"zebra two")
    provider.write(OWNER, "/files/z.txt", b"zebra three")
    first = provider.search(OWNER, SearchRequest(query="zebra", limit=1))
    assert [m.path for m in first.matches] == ["/facts/a.md"]
    provider.delete(OWNER, "/facts/b.md")
    provider.write(OWNER, "/facts/c.md", b"zebra four")
    rest: list[str] = []
    cursor = first.next_cursor
    while cursor:
        page = provider.search(OWNER, SearchRequest(query="zebra", limit=1, cursor=cursor))
        rest += [m.path for m in page.matches]
        cursor = page.next_cursor
    assert "/facts/b.md" not in rest and "/facts/c.md" in rest and "/files/z.txt" in rest
    assert rest == sorted(rest)


def test_a_note_written_outside_its_window_is_refused_before_anything_is_stored(provider: MemoryProvider) -> None:
    with pytest.raises(InvalidPath, match="valid now"):
        provider.write(OWNER, "/facts/past.md", b"---\nvalid_to: 2001-01-01T00:00:00Z\n---\nold news")
    with pytest.raises(InvalidPath, match="valid now"):
        provider.write(OWNER, "/facts/future.md", b"---\nvalid_from: 2999-01-01T00:00:00Z\n---\nnot yet")
    assert provider.list(OWNER, "/history").entries == []
    assert [row["result"] for row in provider.audit_log()][:2] == ["invalid_path", "invalid_path"]


def test_moving_a_symlink_never_indexes_what_it_points_at(provider: MemoryProvider, tmp_path: Path) -> None:
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY MATERIAL")
    provider.mkdir(OWNER, "/files/d")
    os.symlink(secret, tmp_path / "files" / "default" / "d" / "link")
    provider.move(OWNER, "/files/d", "/files/e")
    provider.move(OWNER, "/files/e/link", "/files/e/link2")
    assert provider.search(OWNER, SearchRequest(query="PRIVATE KEY")).matches == []


def test_if_match_lets_exactly_one_of_two_racing_writers_through(provider: MemoryProvider) -> None:
    import threading

    def race(path: str, etag: str) -> list[str]:
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def writer(text: bytes) -> None:
            barrier.wait()
            try:
                provider.write(OWNER, path, text, if_match=etag)
                outcomes.append("ok")
            except Conflict:
                outcomes.append("conflict")

        threads = [threading.Thread(target=writer, args=(f"writer {n}: something else".encode(),)) for n in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return sorted(outcomes)

    for round_ in range(10):
        path = f"/facts/race{round_}.md"
        etag = provider.write(OWNER, path, b"first version of the race note").etag
        assert etag is not None
        assert race(path, etag) == ["conflict", "ok"]


def test_the_grep_cache_holds_a_bounded_number_of_candidates(
    provider: MemoryProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cursors over broad queries are cheap because candidate lists are cached; the cache has a budget."""
    from afi.providers.memory.search import candidates as candidates_module

    monkeypatch.setattr(candidates_module, "GREP_CACHE_CANDIDATES", 100)
    for i in range(60):
        provider.write(OWNER, f"/facts/common-{i:02d}.md", f"shared words and token{i:02d}".encode())
    for word in ("shared", "words", "and", "token"):
        assert provider.search(OWNER, SearchRequest(query=word, path="/facts")).matches
    held = provider._search.cache.sizes()
    assert len(held) == 1 or sum(held) <= 100
    assert provider.search(OWNER, SearchRequest(query="token07", path="/facts")).matches[0].path.endswith("07.md")


def test_folders_show_when_their_space_last_changed_not_1970(provider: MemoryProvider) -> None:
    made = provider.stat(OWNER, "/facts").mtime  # before any write: when the store was made
    assert not made.startswith("1970") and made == provider.stat(OWNER, "/").mtime
    provider.write(OWNER, "/facts/when.md", b"Folders keep time")
    written = provider.stat(OWNER, "/facts/when.md").mtime
    folders = {e.path: e.mtime for e in provider.list(OWNER, "/").entries}
    assert len(set(folders.values())) == 1 and folders["/facts"] == provider.stat(OWNER, "/files").mtime
    assert folders["/facts"] >= written >= made
    assert provider.stat(OTHER, "/facts").mtime == made  # another space has not changed
