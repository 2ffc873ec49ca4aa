"""Sync of the rest of a space, in-process: the ledger's sessions and entries (episodes among them),
working blocks and snapshots travel both ways, merge alike on both sides, keep both sides of a
conflict, and refuse what a store never sends."""

from __future__ import annotations

import json
import random
import time
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from afi.auth.keys import LOCAL_OWNER
from afi.errors import AfiError, InvalidPath, TooLarge
from afi.providers.memory.ledger.index import best_messages
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.sync import LocalEndpoint, sync

Pair = tuple[MemoryProvider, MemoryProvider, LocalEndpoint, LocalEndpoint]
NOON = "2026-01-01T12:00:00.000Z"


def _stores(tmp_path: Path, count: int) -> tuple[list[MemoryProvider], list[LocalEndpoint]]:
    providers = [MemoryProvider(tmp_path / f"{i}.db", tmp_path / f"files-{i}") for i in range(count)]
    return providers, [LocalEndpoint(p, LOCAL_OWNER, f"store-{i}") for i, p in enumerate(providers)]


@pytest.fixture
def pair(tmp_path: Path) -> Pair:
    (a, b), (laptop, server) = _stores(tmp_path, 2)
    return a, b, laptop, server


def _say(provider: MemoryProvider, session: str, *messages: tuple[str, str]) -> None:
    body = {"messages": [{"role": "user", "text": text, "entry_id": entry_id} for entry_id, text in messages]}
    provider.ledger_write(LOCAL_OWNER, "append", session, body)


def _ledger(provider: MemoryProvider) -> dict[str, Any]:
    """Every session of the space with its entries in order, as stored (positions and clocks too)."""
    with provider._db.read() as conn:
        sessions = conn.execute("SELECT key, session_id, created_at FROM ledger_sessions WHERE space = 'default' "
                                "ORDER BY session_id").fetchall()  # fmt: skip
        return {sid: (created, [tuple(r) for r in conn.execute(
            "SELECT pos, mpos, clock, entry_id, type, role, text, timestamp, ref, data FROM ledger_entries "
            "WHERE session_key = ? ORDER BY pos", (key,)).fetchall()]) for key, sid, created in sessions}  # fmt: skip


def _working(provider: MemoryProvider) -> tuple[Any, int]:
    return provider.fabric("default").memory.store.get_working(provider.fabric("default").memory.scope)


def _snapshots(provider: MemoryProvider) -> list[tuple[str, str, str]]:
    return [(s.name, s.at, s.created_at) for s in provider.snapshot_list(LOCAL_OWNER)]


def _read(provider: MemoryProvider, path: str) -> str:
    return provider.read(LOCAL_OWNER, path).data.decode()


def test_sessions_and_their_episodes_travel_once(pair: Pair) -> None:
    a, b, laptop, server = pair
    _say(a, "chat-1", ("m1", "we moved the standup to 9:30"), ("m2", "and the retro to fridays"))
    a.ledger_write(LOCAL_OWNER, "observe", "chat-1", {"text": "the team meets at 9:30", "source_entry_ids": ["m1"]})
    _say(b, "chat-2", ("m1", "the build is green again"))
    report = sync(laptop, server)
    assert (report.pulled.ledger_entries, report.pushed.ledger_entries) == (1, 3)
    assert _ledger(a) == _ledger(b) and set(_ledger(a)) == {"chat-1", "chat-2"}
    assert _read(a, "/sessions/chat-1.md") == _read(b, "/sessions/chat-1.md")
    episodes = [e.path for e in b.list(LOCAL_OWNER, "/episodes").entries]
    assert len(episodes) == 1 and "9:30" in _read(b, episodes[0])
    again = sync(laptop, server)
    assert again.pulled.ledger_entries == again.pushed.ledger_entries == 0  # nothing is sent back
    session = b._space("default").ledger.find_session("chat-1")
    assert session is not None
    best, _ = best_messages(session, ["retro"], 5, None)
    assert [hit[0] for hit in best] == ["m2"]  # the peer's messages are indexed here


def test_appends_to_one_session_on_both_sides_interleave_alike(pair: Pair) -> None:
    a, b, laptop, server = pair
    _say(a, "chat", ("m1", "first"))
    sync(laptop, server)
    _say(a, "chat", ("a2", "laptop says two"), ("a3", "laptop says three"))
    _say(b, "chat", ("b2", "server says two"))
    sync(laptop, server)
    _, entries = _ledger(a)["chat"]
    assert _ledger(a) == _ledger(b)
    assert [e[3] for e in entries] == ["m1", "a2", "b2", "a3"]  # clocks 1, 2, 2, 3: ties by id
    assert [e[0] for e in entries] == [0, 1, 2, 3] and [e[1] for e in entries] == [0, 1, 2, 3]
    _say(b, "chat", ("b4", "after the merge"))  # a new append goes after everything either side had
    sync(laptop, server)
    assert [e[3] for e in _ledger(a)["chat"][1]] == ["m1", "a2", "b2", "a3", "b4"] and _ledger(a) == _ledger(b)


def test_one_entry_id_with_two_texts_keeps_both(pair: Pair) -> None:
    a, b, laptop, server = pair
    _say(a, "chat", ("m1", "the laptop's words"))
    _say(b, "chat", ("m1", "the server's words"))
    report = sync(laptop, server)
    assert _ledger(a) == _ledger(b)
    texts = sorted(e[6] for e in _ledger(a)["chat"][1])
    assert texts == ["the laptop's words", "the server's words"]
    ids = sorted(e[3] for e in _ledger(a)["chat"][1])
    assert ids[0] == "m1" and ids[1].startswith("m1~")
    assert ids[1] in report.pulled.kept_aside + report.pushed.kept_aside
    assert sync(laptop, server).pulled.ledger_entries == 0


def _block(provider: MemoryProvider, label: str, content: str) -> None:
    provider.remember(LOCAL_OWNER, kind="working", block=label, content=content)


def test_a_block_edited_after_a_sync_replaces_the_other_sides(pair: Pair) -> None:
    a, b, laptop, server = pair
    _block(a, "plan", "ship the importer")
    sync(laptop, server)
    assert "ship the importer" in _read(b, "/working/plan.md")
    _block(b, "plan", "ship the importer, then sync")
    b.append_block(LOCAL_OWNER, "plan", "and the watch mode")
    report = sync(laptop, server)
    assert report.pulled.kept_aside == report.pushed.kept_aside == []  # an edit after seeing it is no conflict
    assert _working(a) == _working(b)
    assert "and the watch mode" in _read(a, "/working/plan.md")
    assert [e.path.rsplit("/", 1)[-1] for e in a.list(LOCAL_OWNER, "/working").entries] == ["plan.md"]


def test_a_block_edited_on_both_sides_keeps_the_other_text_beside_it(pair: Pair) -> None:
    a, b, laptop, server = pair
    _block(a, "plan", "ship the importer")
    sync(laptop, server)
    _block(a, "plan", "laptop: ship the importer on monday")
    time.sleep(0.01)  # stamps are milliseconds: the server's write is the later one
    _block(b, "plan", "server: ship it on tuesday")
    report = sync(laptop, server)
    kept = report.pulled.kept_aside + report.pushed.kept_aside
    assert len(kept) >= 1 and kept[0].startswith("plan.conflict-")
    assert _working(a) == _working(b)
    names = sorted(e.path.rsplit("/", 1)[-1] for e in a.list(LOCAL_OWNER, "/working").entries)
    assert names == sorted(["plan.md", f"{kept[0]}.md"])
    texts = {_read(a, "/working/plan.md").split("\n---\n", 1)[-1], _read(a, f"/working/{kept[0]}.md")}
    assert any("monday" in t for t in texts) and any("tuesday" in t for t in texts)  # nothing lost
    assert "tuesday" in _read(a, "/working/plan.md")  # the later write stays under the label
    a.forget(LOCAL_OWNER, block=kept[0])  # read, resolved: the copy cleared on one side
    sync(laptop, server)
    assert [e.path.rsplit("/", 1)[-1] for e in b.list(LOCAL_OWNER, "/working").entries] == ["plan.md"] and _working(
        a
    ) == _working(b)


def test_a_cleared_block_stays_cleared_on_both(pair: Pair) -> None:
    a, b, laptop, server = pair
    _block(a, "scratch", "temporary notes")
    sync(laptop, server)
    b.forget(LOCAL_OWNER, block="scratch")
    sync(laptop, server)
    assert a.list(LOCAL_OWNER, "/working").entries == [] and _working(a) == _working(b)


def test_snapshots_travel_a_deleted_one_stays_deleted_and_one_name_twice_keeps_both(pair: Pair) -> None:
    a, b, laptop, server = pair
    a.snapshot_create(LOCAL_OWNER, "before-import")
    a.snapshot_create(LOCAL_OWNER, "release")
    sync(laptop, server)
    assert _snapshots(b) == _snapshots(a) and len(_snapshots(a)) == 2
    b.snapshot_delete(LOCAL_OWNER, "before-import")
    sync(laptop, server)
    assert [s[0] for s in _snapshots(a)] == ["release"]
    sync(laptop, server)  # no side brings it back
    assert [s[0] for s in _snapshots(b)] == ["release"]
    a.snapshot_create(LOCAL_OWNER, "weekly")
    b.remember(LOCAL_OWNER, kind="fact", content="something between the two")
    b.snapshot_create(LOCAL_OWNER, "weekly")
    report = sync(laptop, server)
    assert _snapshots(a) == _snapshots(b)
    names = [s[0] for s in _snapshots(a)]
    assert "weekly" in names and any(n.startswith("weekly.conflict-") for n in names)
    assert any(k.startswith("weekly.conflict-") for k in report.pulled.kept_aside + report.pushed.kept_aside)


def _ledger_batch(server: LocalEndpoint, entries: list[Any]) -> dict[str, Any]:
    return {"store": server.identity(), "space": "default", "since": 0, "upto": 1, "more": False, "entries": entries}


def _entry(**changes: Any) -> dict[str, Any]:
    entry = {"session": "chat", "session_created_at": "2026-01-01T00:00:00.000Z", "entry_id": "m1",
             "type": "message", "role": "user", "text": "hello", "timestamp": "2026-01-01T00:00:01.000Z",
             "ref": None, "data": {}, "clock": 1}  # fmt: skip
    return {**entry, **changes}


def _state(server: LocalEndpoint, **changes: Any) -> dict[str, Any]:
    return {"store": server.identity(), "space": "default", "version": 1, "blocks": {}, "snapshots": [],
            "dropped": [], "folders": {}, **changes}  # fmt: skip


def test_ledger_batches_and_states_no_store_sends_are_refused_and_change_nothing(pair: Pair) -> None:
    a, _, _, server = pair
    _say(a, "chat", ("m0", "kept as it was"))
    a.snapshot_create(LOCAL_OWNER, "kept")
    before = (_ledger(a), _working(a), _snapshots(a))
    bad_batches: list[Any] = [
        [],
        {"store": "x"},
        {**_ledger_batch(server, []), "space": "other"},
        {**_ledger_batch(server, []), "since": -1},
        {**_ledger_batch(server, []), "extra": 1},
        _ledger_batch(server, [_entry(), {"session": "chat"}]),  # one bad entry refuses the whole batch
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", type="note")]),
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", role="robot")]),
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", role=None)]),
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", type="observation")]),  # a role on a non-message
        _ledger_batch(server, [_entry(), _entry(entry_id="")]),
        _ledger_batch(server, [_entry(), _entry(entry_id="x" * 201)]),
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", session="a/b")]),
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", timestamp="yesterday")]),
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", clock=0)]),
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", clock=2**60)]),
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", clock=True)]),
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", data=[])]),
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", text="x" * 70_000)]),
        _ledger_batch(server, [_entry(), _entry(entry_id="m2", text="nul\x00")]),
        _ledger_batch(server, [_entry(entry_id=f"m{i}") for i in range(501)]),
    ]
    bad_states: list[Any] = [
        [],
        _state(server, space="other"),
        _state(server, version=-1),
        _state(server, blocks={"Bad Label": {"content": "x"}}),
        _state(server, blocks={"plan": {"content": 5}}),
        _state(server, blocks={"plan": {"content": "x", "owner": "me"}}),
        _state(server, blocks={"plan": {"content": "x", "id": "0123456789ab"}}),
        _state(server, blocks={"plan": {"content": "x", "updated_at": "soon"}}),
        _state(server, blocks={"plan": {"content": "x", "seen": ["nothex"]}}),
        _state(server, blocks={"plan": {"content": "x" * 1_000_001}}),
        _state(server, snapshots=[{"name": "Bad", "at": NOON, "created_at": NOON}]),
        _state(server, snapshots=[{"name": "ok", "at": "later", "created_at": "2026-01-01T00:00:00.000Z"}]),
        _state(server, dropped=[{"name": "ok", "at": NOON, "created_at": NOON}]),  # no dropped_at
        _state(server, folders={"../up": ["mkdir", NOON]}),
        _state(server, folders={"/abs": ["mkdir", NOON]}),
        _state(server, folders={"a//b": ["mkdir", NOON]}),
        _state(server, folders={"a/.afi-tmp-x": ["mkdir", NOON]}),
        _state(server, folders={"ok": ["chmod", NOON]}),
        _state(server, folders={"ok": ["mkdir"]}),
        _state(server, folders={"ok": ["mkdir", "noon"]}),
        _state(server, folders=[]),
    ]
    refused = 0
    for batch in bad_batches:
        with pytest.raises((InvalidPath, TooLarge)):
            a.sync_apply_ledger(LOCAL_OWNER, batch, label="server")
        refused += 1
    for state in bad_states:
        with pytest.raises((InvalidPath, TooLarge)):
            a.sync_apply_state(LOCAL_OWNER, state)
        refused += 1
    assert (_ledger(a), _working(a), _snapshots(a)) == before
    print(f"{refused} ledger batches and states refused, failures: 0")


def _random_op(rng: random.Random, provider: MemoryProvider, log: list[str]) -> None:
    """Do one thing a user does to the ledger, the blocks or the snapshots, at random, and log it."""
    roll = rng.random()
    session, label = f"chat-{rng.randrange(3)}", f"b{rng.randrange(3)}"
    try:
        if roll < 0.3:
            n = rng.randrange(1, 4)
            _say(provider, session, *((f"e{rng.randrange(10**9)}", f"said {rng.randrange(10**6)}") for _ in range(n)))
            log.append("append")
        elif roll < 0.35:
            _say(provider, session, (f"shared{rng.randrange(4)}", f"clash {rng.randrange(3)}"))  # ids met twice
            log.append("append an id another store may use")
        elif roll < 0.42:
            provider.ledger_write(LOCAL_OWNER, "observe", session, {"text": f"noticed {rng.randrange(10**6)}"})
            log.append("observe")
        elif roll < 0.6:
            _block(provider, label, f"{label} holds {rng.randrange(10**6)}")
            log.append("set block")
        elif roll < 0.72:
            provider.append_block(LOCAL_OWNER, label, f"line {rng.randrange(10**6)}")
            log.append("append block")
        elif roll < 0.78:
            provider.forget(LOCAL_OWNER, block=label)
            log.append("clear block")
        elif roll < 0.9:
            provider.snapshot_create(LOCAL_OWNER, f"s{rng.randrange(4)}")
            log.append("snapshot")
        else:
            provider.snapshot_delete(LOCAL_OWNER, f"s{rng.randrange(4)}")
            log.append("drop snapshot")
    except AfiError:
        log.append("refused")


def _blocks(provider: MemoryProvider) -> str:
    return json.dumps(_working(provider), sort_keys=True)


@pytest.mark.parametrize("count", [2, 3])
def test_random_ledger_block_and_snapshot_work_on_several_stores_ends_the_same(tmp_path: Path, count: int) -> None:
    rng = random.Random(60 + count)
    providers, ends = _stores(tmp_path, count)
    pairs = [(i, j) for i in range(count) for j in range(count) if i != j]
    log: list[str] = []
    syncs = 0
    for _ in range(300):
        _random_op(rng, rng.choice(providers), log)
        if rng.random() < 0.12:
            i, j = rng.choice(pairs)
            sync(ends[i], ends[j], pull=rng.random() < 0.7, push=rng.random() < 0.7)
            syncs += 1
    for _ in range(6):  # rounds of a sync both ways between each two, until they hold the same
        for i, j in combinations(range(count), 2):
            sync(ends[i], ends[j])
            syncs += 1
        if all((_ledger(p), _blocks(p), _snapshots(p)) == (_ledger(providers[0]), _blocks(providers[0]),
                                                             _snapshots(providers[0])) for p in providers):  # fmt: skip
            break
    ledgers, blocks, snapshots = (
        [_ledger(p) for p in providers],
        [_blocks(p) for p in providers],
        [_snapshots(p) for p in providers],
    )
    assert all(x == ledgers[0] for x in ledgers)
    assert all(x == blocks[0] for x in blocks)
    assert all(x == snapshots[0] for x in snapshots)
    entries = sum(len(e) for _, e in ledgers[0].values())
    print(f"{count} stores: {len(log)} operations ({log.count('refused')} refused), {syncs} syncs, "
          f"{entries} ledger entries, {len(json.loads(blocks[0])[0].get('_fabric', {}).get('blocks', {}))} blocks, "
          f"{len(snapshots[0])} snapshots on each store, failures: 0")  # fmt: skip


def test_the_ledger_blocks_and_snapshots_between_a_sqlite_store_and_a_postgresql_store(
    tmp_path: Path, pg_store_url: str
) -> None:
    rng = random.Random(71)
    a = MemoryProvider(tmp_path / "a.db", tmp_path / "files-a")
    b = MemoryProvider(pg_store_url, tmp_path / "files-b")
    laptop, server = LocalEndpoint(a, LOCAL_OWNER, "laptop"), LocalEndpoint(b, LOCAL_OWNER, "server")
    log: list[str] = []
    for _ in range(120):
        _random_op(rng, rng.choice((a, b)), log)
        if rng.random() < 0.15:
            sync(laptop, server)
    sync(laptop, server)
    sync(laptop, server)
    assert (_ledger(a), _blocks(a), _snapshots(a)) == (_ledger(b), _blocks(b), _snapshots(b))
    print(f"SQLite and PostgreSQL: {len(log)} operations, {sum(len(e) for _, e in _ledger(a).values())} ledger "
          "entries the same on both, failures: 0")  # fmt: skip
