"""``afi sync`` as a user runs it: two store files in step both ways, a conflict printed, the report as
JSON, refusals; and ``kill -9`` in the middle of a sync: each kill leaves both stores whole, and the
next sync finishes the job with every version on both sides once. Figures: kills, how many landed
while versions were travelling, failures (zero)."""

from __future__ import annotations

import json
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from afi.auth.keys import LOCAL_OWNER
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.sync.states import state_of
from tests.support.cli import AFI, afi
from tests.support.servers import serve_store

SEED = 32


def _versions(db: Path) -> dict[str, dict[str, Any]]:
    provider = MemoryProvider(db, db.parent / f"{db.stem}.files")
    memory = provider.fabric("default").memory
    return {note.id: state_of(note) for note in memory.store.select_notes(memory.scope)}


def test_two_stores_in_step_both_ways_with_a_conflict_printed(tmp_path: Path) -> None:
    laptop, server = tmp_path / "laptop.db", tmp_path / "server.db"
    assert afi("remember", "fact", "we use metric units", "--name", "units", db=laptop).returncode == 0
    assert afi("remember", "fact", "deploys go out on tuesdays", "--name", "deploy", db=server).returncode == 0
    dry = afi("sync", str(server), "--dry-run", db=laptop)
    assert dry.returncode == 0, dry.stderr
    would = "would send 1 version, 0 forgets and 0 file versions"
    assert dry.stdout.splitlines() == [f"pull: {would}", f"push: {would}"]
    assert afi("cat", "/facts/deploy.md", db=laptop).returncode == 2  # a dry run changes nothing
    done = afi("sync", str(server), db=laptop)
    assert done.returncode == 0, done.stderr
    assert "tuesdays" in afi("cat", "/facts/deploy.md", db=laptop).stdout
    assert "metric" in afi("cat", "/facts/units.md", db=server).stdout
    assert afi("sync", f"sqlite:///{server}", db=laptop).stdout.splitlines() == [
        "pull: nothing new",
        "push: nothing new",
    ]

    afi("remember", "fact", "we use imperial units", "--name", "units", db=laptop)
    afi("remember", "fact", "we use SI units everywhere", "--name", "units", db=server)
    both = afi("sync", str(server), "--json", db=laptop)
    assert both.returncode == 0, both.stderr
    report = json.loads(both.stdout)
    conflicts = report["pull"]["conflicts"] + report["push"]["conflicts"]
    assert len(conflicts) == 1 and conflicts[0]["name"] == "units"
    assert f"{conflicts[0]['retired']} is kept in /history/{conflicts[0]['retired']}.md" in both.stderr
    current = afi("cat", "/facts/units.md", db=laptop).stdout
    assert current == afi("cat", "/facts/units.md", db=server).stdout
    assert f"- id: {conflicts[0]['retired']}\n  relation: won_over" in current
    kept = afi("cat", f"/history/{conflicts[0]['retired']}.md", db=server)
    assert kept.returncode == 0 and "units" in kept.stdout
    assert _versions(laptop) == _versions(server)
    listed = afi("space", "list", db=server).stdout.splitlines()[1].split("\t")
    assert listed[-1].startswith(f"{socket.gethostname()}:{laptop} at 20"), listed
    peers = json.loads(afi("space", "list", "--json", db=laptop).stdout)[0]["peers"]
    assert [p["label"] for p in peers] == [f"{socket.gethostname()}:{server}"]


def test_the_readme_s_three_commands_keep_a_laptop_and_a_server_in_step(tmp_path: Path) -> None:
    server_db, laptop = tmp_path / "server" / "afi.db", tmp_path / "laptop.db"
    server_db.parent.mkdir()
    made = afi("token", "create", "--scope", "afi:admin", "--name", "laptop", db=server_db)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip().splitlines()[-1]
    afi("remember", "fact", "we use metric units", "--name", "units", db=laptop)
    with serve_store(server_db, tmp_path / "server" / "files", process=True) as server:
        first = afi("sync", server.url, "--token", key, db=laptop)
        assert first.returncode == 0, first.stderr
        pushed = "push: 1 version, 0 forgets and 0 file versions in 1 batch: 1 new, 0 merged, 0 forgotten; "
        pushed += "0 files written, 0 removed"
        assert first.stdout.splitlines() == ["pull: nothing new", pushed]
        reader = httpx.get(server.url + "/afi/read", params={"path": "/facts/units.md"},
                           headers={"Authorization": f"Bearer {key}"}, timeout=30)  # fmt: skip
        assert reader.status_code == 200 and b"metric" in reader.content
        keyless = afi("sync", server.url, db=laptop)
        assert keyless.returncode == 2 and "requires an API key" in keyless.stderr
    assert _versions(laptop) == _versions(server_db)


def test_refusals_name_the_problem_and_change_nothing(tmp_path: Path) -> None:
    laptop = tmp_path / "laptop.db"
    afi("remember", "fact", "we use metric units", "--name", "units", db=laptop)
    cases = [
        (["sync", str(laptop)], "a store syncs with other stores"),
        (["sync", "http://127.0.0.1:9/"], "cannot reach http://127.0.0.1:9"),
        (["sync", str(tmp_path / "no" / "such.db")], "does not exist"),
        (["sync", str(tmp_path / "other.db"), "--pull", "--push"], "each name one direction"),
        (["sync", "mysql://x/y"], "not a store afi can open"),
    ]
    for args, message in cases:
        result = afi(*args, db=laptop)
        assert result.returncode == 2, (args, result.stdout)
        assert message in result.stderr, (args, result.stderr)
    assert len(_versions(laptop)) == 1


def _seed(db: Path, count: int, prefix: str) -> None:
    provider = MemoryProvider(db, db.parent / f"{db.stem}.files")
    for start in range(0, count, 500):
        provider.remember_many(LOCAL_OWNER, [
            {"kind": "fact", "name": f"{prefix}-{i}", "content": f"{prefix} fact number {i} says {i * 7919 % 10007}"}
            for i in range(start, min(count, start + 500))
        ])  # fmt: skip


def _whole(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _rows(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return int(conn.execute("SELECT count(*) FROM notes").fetchone()[0])


def _kill_while_writing(process: subprocess.Popen[bytes], stores: tuple[Path, Path], rng: random.Random) -> bool:
    """Kill the sync at a random moment after it committed a batch (a kill that lands in the next
    one); return False when it finished first."""
    before = sum(_rows(db) for db in stores)
    deadline = time.monotonic() + 120
    while sum(_rows(db) for db in stores) == before:
        if process.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    time.sleep(rng.uniform(0, 0.4))
    if process.poll() is not None:
        return False
    process.send_signal(signal.SIGKILL)
    process.wait()
    return True


@pytest.mark.slow
def test_kill_9_in_the_middle_of_a_sync_leaves_both_stores_whole_and_the_next_sync_finishes(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    laptop, server = tmp_path / "laptop.db", tmp_path / "server.db"
    _seed(laptop, 2000, "laptop")
    _seed(server, 2000, "server")
    kills = landed = 0
    for _ in range(10):
        errors = tmp_path / "stderr.txt"
        with errors.open("wb") as sink:
            process = subprocess.Popen([str(AFI), "sync", str(server), "--db", str(laptop)],
                                       stdout=subprocess.DEVNULL, stderr=sink)  # fmt: skip
            finished = not _kill_while_writing(process, (laptop, server), rng)
        if finished:
            assert process.wait() == 0, errors.read_text()
            break
        kills += 1
        _whole(laptop)
        _whole(server)
        landed += int(2000 < _rows(laptop) < 4000 or 2000 < _rows(server) < 4000)
    final = afi("sync", str(server), db=laptop)
    assert final.returncode == 0, final.stderr
    a, b = _versions(laptop), _versions(server)
    print(f"{kills} kills, {landed} with versions part-way, {len(a)} versions on each side, failures: 0")
    assert len(a) == 4000 and a == b
    assert kills >= 3 and landed >= 1


_WRITER = """
import sys
from pathlib import Path
from afi.auth.keys import LOCAL_OWNER
from afi.providers.memory.provider import MemoryProvider
db = Path(sys.argv[1])
provider = MemoryProvider(db, db.parent / f"{db.stem}.files")
for i in range(int(sys.argv[2])):
    provider.remember(LOCAL_OWNER, kind="fact", name=f"busy-{i % 40}", content=f"written during a sync, {i}")
    provider.remember(LOCAL_OWNER, kind="fact", content=f"an unnamed note written during a sync, number {i}")
"""


@pytest.mark.slow
def test_writes_in_another_process_during_syncs_all_arrive(tmp_path: Path) -> None:
    laptop, server = tmp_path / "laptop.db", tmp_path / "server.db"
    _seed(laptop, 1500, "laptop")
    _seed(server, 1500, "server")
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(laptop), "150"])
    syncs = 0
    while writer.poll() is None or syncs < 2:
        done = afi("sync", str(server), db=laptop)
        assert done.returncode == 0, done.stderr
        syncs += 1
    assert writer.wait() == 0
    final = afi("sync", str(server), db=laptop)
    assert final.returncode == 0, final.stderr
    a, b = _versions(laptop), _versions(server)
    written = sum(1 for state in a.values() if "during a sync" in state["content"])
    print(f"{syncs} syncs while another process wrote 300 notes, {len(a)} versions on each side, failures: 0")
    assert a == b and written >= 150


@pytest.mark.slow
def test_kill_9_of_the_serving_side_in_the_middle_of_an_http_sync(tmp_path: Path) -> None:
    from afi.auth.keys import KeyStore

    rng = random.Random(SEED)
    laptop, server, root = tmp_path / "laptop.db", tmp_path / "server.db", tmp_path / "server-files"
    _seed(laptop, 3000, "laptop")
    keys = KeyStore(server)
    token = keys.create(space="default", scopes=("afi:admin",), name="laptop")[1]
    keys.close()
    kills = landed = 0
    for _ in range(6):
        with serve_store(server, root, process=True) as served:
            assert served.process is not None
            errors = (tmp_path / "stderr.txt").open("wb")
            client = subprocess.Popen([str(AFI), "sync", served.url, "--token", token, "--db", str(laptop)],
                                      stdout=subprocess.DEVNULL, stderr=errors)  # fmt: skip
            before = _rows(server)
            deadline = time.monotonic() + 120
            while _rows(server) == before and client.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(rng.uniform(0, 0.3))
            if client.poll() is None:
                served.process.send_signal(signal.SIGKILL)
                served.process.wait()
            finished = client.wait(60) == 0  # or it finished before the kill landed
            errors.close()
            said = (tmp_path / "stderr.txt").read_text()
            if finished:
                break
            kills += 1
            assert client.returncode == 2 and "afi: " in said, said  # the client says so and stops
            _whole(server)
            landed += int(0 < _rows(server) < 3000)
    with serve_store(server, root, process=True) as served:
        final = afi("sync", served.url, "--token", token, db=laptop)
        assert final.returncode == 0, final.stderr
    a, b = _versions(laptop), _versions(server)
    print(f"{kills} kills of afi serve, {landed} with versions part-way, {len(a)} versions on each side, failures: 0")
    assert len(a) == 3000 and a == b and kills >= 2
