"""Sync between two stores, in-process: versions and forgets both ways, conflicts settled alike on both
sides, nothing sent twice, and batches that are not what a store sends refused whole."""

from __future__ import annotations

import base64
import random
import sqlite3
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from afi.auth.keys import LOCAL_OWNER
from afi.errors import AfiError, Conflict, InvalidPath, TooLarge
from afi.model import SearchRequest
from afi.providers.memory.fabric.embedders import HashEmbedder
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.sync import MAX_BATCH_CHANGES, Batch, LocalEndpoint, sync
from afi.providers.memory.sync.states import state_of

Pair = tuple[MemoryProvider, MemoryProvider, LocalEndpoint, LocalEndpoint]


def _pair(tmp_path: Path, first: str | None = None, second: str | None = None) -> Pair:
    for side in ("files-a", "files-b"):
        (tmp_path / side / "default").mkdir(parents=True)  # a file note names a file of the space
    a = MemoryProvider(first or tmp_path / "a.db", tmp_path / "files-a")
    b = MemoryProvider(second or tmp_path / "b.db", tmp_path / "files-b")
    return a, b, LocalEndpoint(a, LOCAL_OWNER, "laptop"), LocalEndpoint(b, LOCAL_OWNER, "server")


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    return _pair(tmp_path)


def _versions(provider: MemoryProvider) -> dict[str, dict[str, Any]]:
    memory = provider.fabric("default").memory
    return {note.id: state_of(note) for note in memory.store.select_notes(memory.scope)}


def _current(provider: MemoryProvider, name: str) -> str:
    return provider.read(LOCAL_OWNER, f"/facts/{name}.md").data.decode()


def test_a_first_sync_copies_each_side_to_the_other_and_a_second_moves_nothing(pair: Pair) -> None:
    a, b, laptop, server = pair
    a.remember(LOCAL_OWNER, kind="fact", name="units", content="we use metric units")
    b.remember(LOCAL_OWNER, kind="fact", name="deploy", content="deploys go out on tuesdays")
    first = sync(laptop, server)
    assert (first.pulled.inserted, first.pushed.inserted) == (1, 1)
    assert _versions(a) == _versions(b) and len(_versions(a)) == 2
    assert "tuesdays" in _current(a, "deploy") and "metric" in _current(b, "units")
    again = sync(laptop, server)
    assert again.pulled.notes == again.pushed.notes == 0  # what came from the peer is not sent back
    assert [(p.label, p.space) for p in a.sync_peers()] == [("server", "default")]
    assert [(p.label, p.space) for p in b.sync_peers()] == [("laptop", "default")]


def test_an_edit_on_one_side_supersedes_on_the_other(pair: Pair) -> None:
    a, b, laptop, server = pair
    a.remember(LOCAL_OWNER, kind="fact", name="units", content="we use metric units")
    sync(laptop, server)
    b.remember(LOCAL_OWNER, kind="fact", name="units", content="we use imperial units since may")
    report = sync(laptop, server)
    assert report.pulled.conflicts == [] and report.pushed.conflicts == []
    assert "imperial" in _current(a, "units")
    assert _versions(a) == _versions(b) and len(_versions(a)) == 2  # the old version kept on both


def test_one_name_written_on_both_sides_keeps_both_versions_and_one_current(pair: Pair) -> None:
    a, b, laptop, server = pair
    a.remember(LOCAL_OWNER, kind="fact", name="units", content="we use metric units")
    sync(laptop, server)
    a.remember(LOCAL_OWNER, kind="fact", name="units", content="we use imperial units now")
    b.remember(LOCAL_OWNER, kind="fact", name="units", content="we use SI units everywhere")
    report = sync(laptop, server)
    conflicts = report.pulled.conflicts + report.pushed.conflicts
    assert len(conflicts) == 1 and conflicts[0].name == "units"
    assert _versions(a) == _versions(b) and len(_versions(a)) == 3
    current = _current(a, "units")
    assert current == _current(b, "units")
    assert f"id: {conflicts[0].retired}\n  relation: won_over" in current  # the winner names the version it won over
    retired = a.read(LOCAL_OWNER, f"/history/{conflicts[0].retired}.md").data.decode()
    assert "status: superseded" in retired or "valid_to" in retired


def test_a_forget_travels_and_a_stale_copy_does_not_bring_the_note_back(pair: Pair) -> None:
    a, b, laptop, server = pair
    note = a.remember(LOCAL_OWNER, kind="fact", name="secret", content="the door code is 4711")
    sync(laptop, server)
    a.forget(LOCAL_OWNER, id=note.id)
    report = sync(laptop, server)
    assert report.pushed.deleted == 1
    assert note.id not in _versions(b)
    sync(laptop, server)  # b no longer has it to send; a refuses the forgotten id if it comes back
    assert note.id not in _versions(a) and note.id not in _versions(b)


def test_a_forgotten_version_sent_again_is_not_taken_back(pair: Pair) -> None:
    a, _, laptop, server = pair
    note = a.remember(LOCAL_OWNER, kind="fact", name="secret", content="the door code is 4711")
    stale = laptop.read(since=0, peer=server.identity())
    a.forget(LOCAL_OWNER, id=note.id)
    applied = a.sync_apply(LOCAL_OWNER, Batch(server.identity(), "default", 0, 1, False, stale.notes, []),
                           label="server")  # fmt: skip
    assert applied.inserted == 0 and note.id not in _versions(a)


def test_a_store_does_not_sync_with_itself_or_a_copy_of_its_file(tmp_path: Path) -> None:
    a, _, laptop, _ = _pair(tmp_path)
    a.remember(LOCAL_OWNER, kind="fact", content="x")
    a.store_id()
    copy = tmp_path / "copy.db"
    with sqlite3.connect(tmp_path / "a.db") as source, sqlite3.connect(copy) as target:
        source.backup(target)  # a copy of the file as a backup tool makes it
    twin = LocalEndpoint(MemoryProvider(copy, tmp_path / "files-copy"), LOCAL_OWNER, "copy")
    with pytest.raises(Conflict, match="a store syncs with other stores"):
        sync(laptop, twin)


def _batch(server: LocalEndpoint, notes: list[Any], forgotten: list[Any] | None = None) -> Batch:
    return Batch(server.identity(), "default", 0, 1, False, notes, forgotten or [])


def test_batches_a_store_never_sends_are_refused_and_change_nothing(pair: Pair) -> None:
    a, b, _, server = pair
    b.remember(LOCAL_OWNER, kind="fact", name="units", content="we use metric units")
    good = server.read(since=0, peer="someone").notes[0]
    a.remember(LOCAL_OWNER, kind="fact", name="mine", content="mine alone")
    before = _versions(a)
    future = {**good, "created_at": "2099-01-01T00:00:00.000Z", "ingested_at": "2099-01-01T00:00:00.000Z"}
    bad: list[tuple[list[Any], list[Any], type[Exception], str]] = [
        ([{**good, "id": "../../etc"}], [], InvalidPath, "20 hex digits"),
        ([{**good, "kind": "working"}], [], InvalidPath, "fact, procedure or file"),
        ([future], [], InvalidPath, "ahead of this store's clock"),
        ([{**good, "created_at": "yesterday"}], [], InvalidPath, "created_at"),
        ([{**good, "bogus": 1}], [], InvalidPath, "unknown bogus"),
        ([{k: v for k, v in good.items() if k != "content"}], [], InvalidPath, "missing content"),
        ([good, good], [], InvalidPath, "once a batch"),
        ([{**good, "content": "x" * 10_000_000}], [], TooLarge, "content"),
        ([], ["not-an-id"], InvalidPath, "20 hex digits"),
        (["x"], [], InvalidPath, "an object"),
    ]
    tried = 0
    for notes, forgotten, error, message in bad:
        with pytest.raises(error, match=message):
            a.sync_apply(LOCAL_OWNER, _batch(server, [*notes, good], forgotten), label="server")
        tried += 1
        assert _versions(a) == before and a.sync_peers() == []
    other_space = Batch(server.identity(), "work", 0, 1, False, [good], [])
    with pytest.raises(InvalidPath, match="changes of space 'work', not of 'default'"):
        a.sync_apply(LOCAL_OWNER, other_space, label="server")
    tried += 1
    with pytest.raises(TooLarge, match=f"at most {MAX_BATCH_CHANGES}"):
        Batch.from_json({**_batch(server, [good] * (MAX_BATCH_CHANGES + 1)).to_json()})
    for shape in [None, [], {"store": "x"}, {**_batch(server, []).to_json(), "upto": -1}]:
        with pytest.raises(InvalidPath):
            Batch.from_json(shape)
        tried += 1
    assert tried == 15 and _versions(a) == before


def test_one_version_id_that_names_two_different_notes_is_refused(pair: Pair) -> None:
    a, b, _, server = pair
    mine = a.remember(LOCAL_OWNER, kind="fact", name="units", content="we use metric units")
    b.remember(LOCAL_OWNER, kind="fact", name="other", content="another note")
    theirs = server.read(since=0, peer="someone").notes[0]
    forged = {**theirs, "id": mine.id, "kind": "procedure"}  # the same id, a note of another kind
    before = _versions(a)
    with pytest.raises(Conflict, match="names two different notes"):
        a.sync_apply(LOCAL_OWNER, _batch(server, [forged]), label="server")
    assert _versions(a) == before


def test_one_explicit_id_written_on_both_sides_is_one_note_and_keeps_both_texts(pair: Pair) -> None:
    a, b, laptop, server = pair
    a.remember(LOCAL_OWNER, kind="fact", id="0000000000aa", name="units", content="we use metric units")
    b.remember(LOCAL_OWNER, kind="fact", id="0000000000aa", name="units", content="we use imperial units")
    report = sync(laptop, server)
    assert _versions(a) == _versions(b) and len(_versions(a)) == 2  # the note and the losing text, retired
    assert _current(a, "units") == _current(b, "units")
    conflicts = report.pulled.conflicts + report.pushed.conflicts
    assert {c.kept for c in conflicts} == {"0000000000aa"} and len({c.retired for c in conflicts}) == 1
    again = sync(laptop, server)  # nothing blocks the next sync
    assert again.pulled.notes == again.pushed.notes == 0


def _random_op(rng: random.Random, provider: MemoryProvider, names: list[str], log: list[str]) -> None:
    """Given a store, do one thing a user does to it, at random, and log it (a refused one as refused)."""
    memory = provider.fabric("default").memory
    every = memory.store.select_notes(memory.scope)
    current = [n for n in every if n.valid_to is None and n.status == "active" and n.kind != "file"]
    roll, name, kind = rng.random(), rng.choice(names), "procedure" if rng.random() < 0.15 else "fact"
    try:
        if roll < 0.3 or not current:
            provider.remember(LOCAL_OWNER, kind=kind, name=name, content=f"{name} is {rng.randrange(10**6)}")
            log.append(f"remember {name}")
        elif roll < 0.4:  # an unnamed note near a current one: it may fold into it
            target = rng.choice(current)
            provider.remember(LOCAL_OWNER, kind=target.kind, content=f"{target.content} {rng.choice(names)}")
            log.append("remember unnamed near")
        elif roll < 0.47:
            provider.remember(LOCAL_OWNER, kind="fact", content=f"loose thought {rng.randrange(10**9)} about {name}")
            log.append("remember unnamed")
        elif roll < 0.55:
            target = rng.choice(current)
            provider.remember(LOCAL_OWNER, kind=target.kind, content=f"instead of {target.id}: {rng.randrange(10**6)}",
                              supersedes=target.id)  # fmt: skip
            log.append(f"supersede {target.id}")
        elif roll < 0.6:
            valid_to = f"20{rng.randrange(31, 40)}-01-01T00:00:00.000Z" if rng.random() < 0.5 else None
            valid_from = f"20{rng.randrange(20, 30)}-06-01T00:00:00.000Z"
            provider.remember(LOCAL_OWNER, kind="fact", name=name, content=f"{name} from {rng.randrange(10**6)}",
                              valid_from=valid_from, valid_to=valid_to)  # fmt: skip
            log.append(f"remember {name} with a window")
        elif roll < 0.7:  # mostly a current version; sometimes any (a held one, a retired one)
            target = rng.choice(current if rng.random() < 0.6 else every)
            provider.forget(LOCAL_OWNER, id=target.id)
            log.append(f"forget {target.id}")
        elif roll < 0.75:
            target = rng.choice(every)
            provider.forget(LOCAL_OWNER, id=target.id, hold=True)
            log.append(f"hold {target.id}")
        elif roll < 0.85:  # a re-save of the same words, or shouted (a fold in place)
            target = rng.choice(current)
            content = target.content.upper() if rng.random() < 0.5 else target.content
            provider.remember(LOCAL_OWNER, kind=target.kind, name=target.name, content=content)
            log.append(f"resave {target.name}")
        elif roll < 0.9:  # an explicit id rewrites its version in place
            target = rng.choice(current)
            provider.remember(LOCAL_OWNER, kind=target.kind, id=target.id, content=f"rewritten {rng.randrange(10**6)}")
            log.append(f"rewrite {target.id}")
        else:
            path = f"docs/{name}.txt"
            provider.remember(LOCAL_OWNER, kind="file", path=path, content=f"{path} says {rng.randrange(10**6)}")
            log.append(f"note file {path}")
    except AfiError:
        log.append("refused")


def _stores(tmp_path: Path, count: int) -> tuple[list[MemoryProvider], list[LocalEndpoint]]:
    providers = []
    for i in range(count):
        (tmp_path / f"files-{i}" / "default").mkdir(parents=True)  # a file note names a file of the space
        providers.append(MemoryProvider(tmp_path / f"{i}.db", tmp_path / f"files-{i}"))
    return providers, [LocalEndpoint(p, LOCAL_OWNER, f"store-{i}") for i, p in enumerate(providers)]


def _one_current_each(provider: MemoryProvider) -> None:
    memory = provider.fabric("default").memory
    rows = memory.store.select_notes(memory.scope, "valid_to IS NULL AND status = 'active'")
    names = Counter((n.kind, n.name) for n in rows)
    paths = Counter(n.path for n in rows if n.kind == "file")
    assert max(names.values(), default=1) == 1 and max(paths.values(), default=1) == 1, (names, paths)


@pytest.mark.parametrize("count", [2, 3])
def test_random_writes_on_several_stores_with_syncs_between_end_the_same(tmp_path: Path, count: int) -> None:
    rng = random.Random(32 + count)
    providers, ends = _stores(tmp_path, count)
    pairs = [(i, j) for i in range(count) for j in range(count) if i != j]
    names = [f"n{i}" for i in range(8)]
    log: list[str] = []
    syncs = 0
    for _ in range(300):
        _random_op(rng, rng.choice(providers), names, log)
        if rng.random() < 0.12:
            i, j = rng.choice(pairs)
            sync(ends[i], ends[j], pull=rng.random() < 0.7, push=rng.random() < 0.7)
            syncs += 1
    rounds = 0
    while True:  # rounds of a sync both ways between each two, until a round moves nothing
        rounds += 1
        moved = 0
        for i, j in combinations(range(count), 2):
            report = sync(ends[i], ends[j])
            moved += sum(t.notes + t.forgotten for t in (report.pulled, report.pushed))
            syncs += 1
        assert rounds <= 6, f"still moving after {rounds} rounds"
        if moved == 0:
            break
    versions = [_versions(p) for p in providers]
    assert all(v == versions[0] for v in versions), [len(v) for v in versions]
    _one_current_each(providers[0])
    for name in names:
        if _exists(providers[0], name):
            assert len({_current(p, name) for p in providers}) == 1, name
    print(
        f"{count} stores: {len(log)} operations ({log.count('refused')} refused), {syncs} syncs, "
        f"{len(versions[0])} versions on each store, failures: 0"
    )


def test_a_sqlite_store_and_a_postgresql_store_end_the_same(tmp_path: Path, pg_store_url: str) -> None:
    rng = random.Random(33)
    a, b, laptop, server = _pair(tmp_path, second=pg_store_url)
    names = [f"n{i}" for i in range(6)]
    log: list[str] = []
    for _ in range(120):
        _random_op(rng, rng.choice((a, b)), names, log)
        if rng.random() < 0.15:
            sync(laptop, server, pull=rng.random() < 0.7, push=rng.random() < 0.7)
    sync(laptop, server)
    sync(laptop, server)
    assert _versions(a) == _versions(b)
    for name in names:
        if _exists(a, name):
            assert _current(a, name) == _current(b, name)


def _exists(provider: MemoryProvider, name: str) -> bool:
    return any(e.path == f"/facts/{name}.md" for e in provider.list(LOCAL_OWNER, "/facts").entries)


def test_gc_is_one_stores_housekeeping_and_its_drops_do_not_travel(pair: Pair) -> None:
    a, b, laptop, server = pair
    old = a.remember(LOCAL_OWNER, kind="fact", name="units", content="we use metric units",
                     valid_to="2020-01-01T00:00:00.000Z")  # fmt: skip
    sync(laptop, server)
    report = a.gc(LOCAL_OWNER, 0)
    assert report.note_versions == 1 and old.id not in _versions(a)
    assert sync(laptop, server).pushed.forgotten == 0
    assert old.id in _versions(b)


class _CountingHash(HashEmbedder):
    """The hash embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def embed(self, texts: list[str]) -> Any:
        self.texts += len(texts)
        return super().embed(texts)


def test_the_peers_vectors_travel_when_both_use_one_embedder(tmp_path: Path) -> None:
    counting = _CountingHash()
    a = MemoryProvider(tmp_path / "a.db", tmp_path / "files-a", embedder=HashEmbedder())
    b = MemoryProvider(tmp_path / "b.db", tmp_path / "files-b", embedder=counting)
    a.remember_many(LOCAL_OWNER, [{"kind": "fact", "content": f"fact {i} about {i * 31}"} for i in range(40)])
    batch = LocalEndpoint(a, LOCAL_OWNER, "a").read(since=0, peer="b")
    assert batch.embedder == "hash-fnv1a-384:384" and len(batch.vectors) == 40
    sync(LocalEndpoint(b, LOCAL_OWNER, "b"), LocalEndpoint(a, LOCAL_OWNER, "a"), push=False)  # b pulls a
    assert counting.texts == 0  # taken as sent, not embedded again
    memory_a, memory_b = a.fabric("default").memory, b.fabric("default").memory
    stored = {r[2]: r[-1] for r in memory_a.store.rows_with_embeddings(memory_a.scope, "TRUE")}
    assert stored == {r[2]: r[-1] for r in memory_b.store.rows_with_embeddings(memory_b.scope, "TRUE")}
    broken = Batch(batch.store, "default", 0, 1, False, batch.notes[:1], [], batch.embedder,
                   {batch.notes[0]["id"]: base64.b64encode(b"h" + b"\x00\x7c" * 384).decode()})  # fmt: skip
    c = MemoryProvider(tmp_path / "c.db", tmp_path / "files-c", embedder=HashEmbedder())
    with pytest.raises(InvalidPath, match="finite components"):  # 0x7c00 is +inf at half precision
        c.sync_apply(LOCAL_OWNER, broken, label="a")
    past = b"s" + (384).to_bytes(2, "little") + (999).to_bytes(2, "little") + b"\x00\x3c"  # component 999 of 384
    broken.vectors = {batch.notes[0]["id"]: base64.b64encode(past).decode()}
    with pytest.raises(InvalidPath, match="finite components"):
        c.sync_apply(LOCAL_OWNER, broken, label="a")
    broken.vectors = {batch.notes[0]["id"]: base64.b64encode(b"s" + b"\x00" * 4).decode()}  # a sparse body of 4 bytes
    with pytest.raises(InvalidPath, match="not base64 of a stored vector"):
        c.sync_apply(LOCAL_OWNER, broken, label="a")
    assert c.sync_peers() == []


def test_a_held_version_forgotten_on_the_side_that_held_it_comes_back_from_the_other(pair: Pair) -> None:
    a, b, laptop, server = pair
    note = a.remember(LOCAL_OWNER, kind="fact", name="contract", content="the contract ends in june")
    a.forget(LOCAL_OWNER, id=note.id, hold=True)
    sync(laptop, server)
    a.forget(LOCAL_OWNER, id=note.id)  # a forget of a held version deletes it here; the server holds it
    sync(laptop, server)
    sync(laptop, server)
    assert _versions(a) == _versions(b) and _versions(a)[note.id]["status"] == "legal_hold"


def _file_notes(provider: MemoryProvider, path: str) -> list[str]:
    memory = provider.fabric("default").memory
    rows = memory.store.select_notes(memory.scope, "kind = 'file' AND path = ? AND valid_to IS NULL AND "
                                     "status = 'active'", (path,))  # fmt: skip
    return [row.id for row in rows]


def test_one_file_noted_on_both_sides_keeps_both_versions_and_one_current(tmp_path: Path) -> None:
    a, b, laptop, server = _pair(tmp_path)
    a.remember(LOCAL_OWNER, kind="file", path="docs/plan.txt", content="the plan: ship in june")
    b.remember(LOCAL_OWNER, kind="file", path="docs/plan.txt", content="the plan: ship in july")
    report = sync(laptop, server)
    assert _versions(a) == _versions(b) and len(_versions(a)) == 2
    assert len(_file_notes(a, "docs/plan.txt")) == 1 and _file_notes(a, "docs/plan.txt") == _file_notes(
        b, "docs/plan.txt"
    )
    conflicts = report.pulled.conflicts + report.pushed.conflicts
    assert [(c.kind, c.name) for c in conflicts] == [("file", "docs/plan.txt")]


def test_a_version_with_a_window_ending_ahead_written_on_one_side_is_settled_like_an_open_one(pair: Pair) -> None:
    a, b, laptop, server = pair
    b.remember(LOCAL_OWNER, kind="fact", name="units", content="we use SI units everywhere")
    a.remember(LOCAL_OWNER, kind="fact", name="units", content="we use metric units until 2035",
               valid_from="2021-06-01T00:00:00.000Z", valid_to="2035-01-01T00:00:00.000Z")  # fmt: skip
    b.remember(LOCAL_OWNER, kind="fact", name="units", content="we use imperial units now")
    sync(laptop, server)
    assert _versions(a) == _versions(b)
    assert _current(a, "units") == _current(b, "units")  # each side read the version it wrote last


def _rows(provider: MemoryProvider) -> dict[str, tuple[Any, ...]]:
    """Every note row of the space by id, as stored: its fields, rendering and vector (not its seq or rowid)."""
    conn = provider.fabric("default").memory.store.conn()
    names = [r[1] for r in conn.execute("PRAGMA table_info(notes)") if r[1] not in ("rowid", "seq")]
    return {row[names.index("id")]: row for row in conn.execute(f"SELECT {', '.join(names)} FROM notes")}


def test_a_batch_of_new_versions_is_stored_as_the_store_writes_them_and_found_by_every_search(pair: Pair) -> None:
    a, b, laptop, server = pair
    items: list[dict[str, Any]] = [
        {"kind": "fact", "name": f"n{i}", "content": f"plain fact number {i} about zephyrs"} for i in range(300)
    ]
    items += [
        {"kind": "fact", "name": "deploy-day", "content": "Deploys: Tuesdays\nnever Fridays", "tags": ["ops", "yes"],
         "keywords": ["deploy", "café"], "context": "a: runbook # 2", "importance": 0.25},
        {"kind": "procedure", "name": "rollback", "content": "roll back with the canary first", "context": "two\nlines",
         "valid_from": "2021-06-01T00:00:00.000Z", "valid_to": "2035-01-01T00:00:00.000Z"},
        {"kind": "fact", "content": "a note with no name, 日本語 and 😀", "tags": ["null", "1e3", "x-y"]},
    ]  # fmt: skip
    a.remember_many(LOCAL_OWNER, items)
    report = sync(laptop, server)
    assert report.pushed.inserted == len(items) and report.pushed.batches == 1
    assert _rows(a) == _rows(b)
    memory = b.fabric("default").memory
    origins = {row[0] for row in memory.store.conn().execute("SELECT DISTINCT origin FROM note_changes")}
    assert origins == {laptop.identity()}
    assert len(memory.store.changes_since(memory.scope, 0)) == len(items)
    for query in ("zephyrs", "Fridays", "runbook", "日本語", {"semantic": "fridays deploys"}):
        request = SearchRequest.model_validate({"query": query, "limit": 1000})
        found = [m.path for m in b.search(LOCAL_OWNER, request).matches]
        assert found and found == [m.path for m in a.search(LOCAL_OWNER, request).matches], query
