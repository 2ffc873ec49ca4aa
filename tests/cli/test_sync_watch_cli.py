"""``afi sync --watch`` as a user runs it, in its own process: two stores kept in step round after round,
a line for a round that moved something and none for one that did not, one JSON object a round,
SIGTERM and SIGINT ending it with exit 0 (in the middle of a first sync too, leaving whole batches),
a real ``afi serve`` that is down at the start, killed and restarted while the watch keeps going, and
every refusal of a watch that cannot be (an interval that is not one, --dry-run, no key) with exit 2.
Then the conflicts such syncs settle, as ``afi diff`` shows them, and an edit closing one."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from afi.auth.keys import LOCAL_OWNER, KeyStore
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.sync.states import state_of
from tests.support.cli import AFI, afi
from tests.support.servers import serve_store
from tests.support.warm import AfiPopen

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def _store(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir()
    return tmp_path / name / "afi.db"  # its workspace: <name>/files, as afi() and afi sync both find it


def _versions(db: Path) -> dict[str, dict[str, Any]]:
    memory = MemoryProvider(db, db.parent / "files").fabric("default").memory
    return {note.id: state_of(note) for note in memory.store.select_notes(memory.scope)}


def _rows(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return int(conn.execute("SELECT count(*) FROM notes").fetchone()[0])


def _sigint_as_from_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Watching:
    """``afi sync ... --watch`` over ``db`` in its own process; its stdout and stderr read line by line."""

    def __init__(self, db: Path, *args: str, cold: bool = False) -> None:
        env = {**os.environ, "AFI_DB": str(db), "AFI_ROOT": str(db.parent / "files"), "COLUMNS": "200"}
        # as from a terminal, where Ctrl-C works: a test worker may run with SIGINT ignored, which an
        # exec'd child inherits (and a watch started with SIGINT ignored keeps ignoring it, on purpose)
        extra: dict[str, Any] = {"preexec_fn": _sigint_as_from_a_terminal} if cold else {}
        start = subprocess.Popen if cold else AfiPopen
        self.process: subprocess.Popen[str] = start(
            [str(AFI), "sync", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **extra
        )
        self.out: queue.Queue[str] = queue.Queue()
        self.err: queue.Queue[str] = queue.Queue()
        self.said: list[str] = []  # every stderr line so far
        streams = ((self.process.stdout, self.out), (self.process.stderr, self.err))
        self.pumps = [threading.Thread(target=self._pump, args=pair, daemon=True) for pair in streams]
        for pump in self.pumps:
            pump.start()

    @staticmethod
    def _pump(stream: Any, lines: queue.Queue[str]) -> None:
        for line in iter(stream.readline, ""):
            lines.put(line.rstrip("\n"))
        stream.close()

    def line(self, timeout: float = 60) -> str:
        """The next stdout line; fails the test after ``timeout`` seconds or when the watch ended."""
        try:
            return self.out.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line in {timeout} s; stderr: {self.stderr()}") from None

    def no_line(self, seconds: float) -> None:
        """Nothing on stdout for ``seconds``."""
        with pytest.raises(queue.Empty):
            extra = self.out.get(timeout=seconds)
            pytest.fail(f"a quiet round printed {extra!r}")

    def said_line(self, pattern: str, timeout: float = 60) -> str:
        """The next stderr line matching ``pattern`` (a regex searched in it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.err.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.said.append(line)
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no stderr line matching {pattern!r} in {timeout} s; stderr: {self.said}")

    def stderr(self) -> list[str]:
        while not self.err.empty():
            self.said.append(self.err.get_nowait())
        return self.said

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Send ``sig``; return the exit code once the watch ended and its last lines are read."""
        self.process.send_signal(sig)
        code = self.process.wait(timeout)
        for pump in self.pumps:
            pump.join(30)
        return code

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        for pump in self.pumps:
            pump.join(30)


@pytest.mark.parametrize(
    ("sig", "cold"),
    [
        pytest.param(signal.SIGTERM, False, id="SIGTERM"),
        # exec'd: the warm launcher's children are not sent SIGINT (tests/cli/test_warm_launcher.py says why)
        pytest.param(signal.SIGINT, True, id="SIGINT"),
    ],
)
def test_a_watch_keeps_two_stores_in_step_quietly_until_a_signal(tmp_path: Path, sig: int, cold: bool) -> None:
    laptop, server = _store(tmp_path, "laptop"), _store(tmp_path, "server")
    remembered = afi("remember", "fact", "we use metric units", "--name", "units", db=laptop)
    assert remembered.returncode == 0, remembered.stderr
    units = remembered.stdout.split()[1]  # id: <id>
    watching = Watching(laptop, str(server), "--watch", "--every", "0.3", cold=cold)
    try:
        assert re.fullmatch(rf"{STAMP} push: 1 version \(1 new, 0 merged\)", watching.line()), watching.stderr()
        watching.no_line(1.5)  # five rounds or so that moved nothing: nothing printed
        assert afi("remember", "fact", "deploys go out on tuesdays", "--name", "deploy", db=server).returncode == 0
        assert re.fullmatch(rf"{STAMP} pull: 1 version \(1 new, 0 merged\)", watching.line())
        assert afi("forget", "--id", units, db=laptop).returncode == 0
        assert re.fullmatch(rf"{STAMP} push: 1 forget \(1 applied\)", watching.line())
        block = afi("remember", "working", "reviewing the units change", "--block", "core", db=server)
        assert block.returncode == 0, block.stderr
        assert re.fullmatch(rf"{STAMP} pull: 1 working block changed", watching.line())
        assert watching.stop(sig) == 0
    finally:
        watching.close()
    said = watching.stderr()
    assert said[0].startswith("afi: watching ") and "then every 0.3s" in said[0]
    stopped = re.fullmatch(rf"afi: stopped by {signal.Signals(sig).name} after (\d+) rounds", said[-1])
    assert stopped is not None and int(stopped[1]) >= 5, said
    assert not any("Traceback" in line for line in said), said
    assert _versions(laptop) == _versions(server) and len(_versions(laptop)) == 1


def test_json_prints_one_object_a_round_quiet_rounds_included(tmp_path: Path) -> None:
    laptop, server = _store(tmp_path, "laptop"), _store(tmp_path, "server")
    afi("remember", "fact", "we use metric units", "--name", "units", db=laptop)
    watching = Watching(laptop, f"sqlite:///{server}", "--watch", "--every", "0.2", "--json", "--push")
    try:
        rounds = [json.loads(watching.line()) for _ in range(4)]
        assert watching.stop() == 0
    finally:
        watching.close()
    assert [r["round"] for r in rounds] == [1, 2, 3, 4]
    assert all(re.fullmatch(STAMP, r["at"]) for r in rounds)
    assert rounds[0]["push"]["versions"] == 1 and rounds[0]["push"]["inserted"] == 1
    assert [r["push"]["batches"] for r in rounds[1:]] == [0, 0, 0]
    assert all(r["pull"]["batches"] == 0 and r["dry_run"] is False for r in rounds)  # --push: nothing pulled
    assert set(rounds[0]) == {"round", "at", "dry_run", "pull", "push"}


def test_sigterm_in_the_middle_of_a_first_sync_leaves_whole_batches_and_the_next_sync_finishes(tmp_path: Path) -> None:
    laptop, server = _store(tmp_path, "laptop"), _store(tmp_path, "server")
    provider = MemoryProvider(laptop, laptop.parent / "files")
    for start in range(0, 3000, 500):
        provider.remember_many(LOCAL_OWNER, [
            {"kind": "fact", "name": f"n-{i}", "content": f"fact number {i} says {i * 7919 % 10007}"}
            for i in range(start, start + 500)
        ])  # fmt: skip
    watching = Watching(laptop, str(server), "--watch")
    try:
        deadline = time.monotonic() + 120
        while _landed(server) == 0 and time.monotonic() < deadline:
            assert watching.process.poll() is None, watching.stderr()
            time.sleep(0.02)
        assert watching.stop(timeout=60) == 0  # a batch or more in: the rest was still travelling
    finally:
        watching.close()
    said = watching.stderr()
    assert said[-1] == "afi: stopped by SIGTERM in round 1; the next sync goes on where it stopped", said
    assert not any("Traceback" in line for line in said), said
    with sqlite3.connect(server) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    landed = _rows(server)
    assert landed % 500 == 0 and 0 < landed < 3000, landed  # whole batches of 500, each one transaction
    final = afi("sync", str(server), db=laptop)
    assert final.returncode == 0, final.stderr
    assert f"push: {3000 - landed} versions" in final.stdout, final.stdout  # no batch sent twice
    assert _versions(laptop) == _versions(server)


def _landed(db: Path) -> int:
    """The notes of a store a sync is creating (0 before its file and tables are there)."""
    try:
        return _rows(db) if db.exists() else 0
    except sqlite3.OperationalError:
        return 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_watch_rides_out_a_server_down_at_the_start_killed_and_restarted(tmp_path: Path) -> None:
    laptop, server_db = _store(tmp_path, "laptop"), _store(tmp_path, "server")
    keys = KeyStore(server_db)
    token = keys.create(space="default", scopes=("afi:admin",), name="laptop")[1]
    keys.close()
    port, root = _free_port(), server_db.parent / "files"
    url = f"http://127.0.0.1:{port}"
    afi("remember", "fact", "we use metric units", "--name", "units", db=laptop)
    watching = Watching(laptop, url, "--token", token, "--watch", "--every", "0.5")
    try:
        watching.said_line(rf"afi: internal: cannot reach {re.escape(url)}.*\(round 1 at {STAMP}; next in 0.5s\)")
        watching.said_line(r"\(round 2 at")  # retried, not ended
        with serve_store(server_db, root, "--port", str(port)) as served:
            assert served.url == url
            assert re.fullmatch(rf"{STAMP} push: 1 version \(1 new, 0 merged\)", watching.line())
            refused = afi("sync", url, "--token", "not-a-key", "--watch", db=laptop)  # a key that no retry mends
            assert refused.returncode == 2 and "unauthorized" in refused.stderr, refused.stderr
            httpx.put(url + "/afi/write", params={"path": "/facts/deploy.md"}, content=b"deploys go out on tuesdays",
                      headers={"Authorization": f"Bearer {token}"}, timeout=30).raise_for_status()  # fmt: skip
            assert re.fullmatch(rf"{STAMP} pull: 1 version \(1 new, 0 merged\)", watching.line())
            assert served.process is not None
            served.process.send_signal(signal.SIGKILL)
            served.process.wait(30)
            afi("remember", "fact", "we ship on fridays", "--name", "ship", db=laptop)
            watching.said_line(r"afi: internal: cannot reach")
            watching.said_line(r"afi: internal: cannot reach")  # and again: the watch goes on
        assert watching.process.poll() is None
        with serve_store(server_db, root, "--port", str(port)):
            assert re.fullmatch(rf"{STAMP} push: 1 version \(1 new, 0 merged\)", watching.line(90))
            assert watching.stop() == 0
    finally:
        watching.close()
    assert not any("Traceback" in line for line in watching.stderr())
    assert _versions(laptop) == _versions(server_db) and len(_versions(laptop)) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--every", "0"], "'0' is no time to wait", id="zero"),
        pytest.param(["--every", "0s"], "'0s' is no time to wait", id="zero-seconds"),
        pytest.param(["--every", "-5"], "'-5' is no time to wait", id="negative"),
        pytest.param(["--every", "-1m"], "'-1m' is no time to wait", id="negative-minutes"),
        pytest.param(["--every", "soon"], "'soon' is not an interval: write 30s, 5m, 1h", id="a-word"),
        pytest.param(["--every", ""], "'' is not an interval", id="empty"),
        pytest.param(["--every", "1h30m"], "'1h30m' is not an interval", id="two-units"),
        pytest.param(["--every", "2d"], "'2d' is not an interval", id="days"),
        pytest.param(["--every", "169h"], "'169h' is more than a week", id="over-a-week"),
        pytest.param(["--every", "nan"], "'nan' is not an interval", id="nan"),
        pytest.param(["--dry-run"], "--dry-run and --watch do not go together", id="dry-run"),
        pytest.param(["--pull", "--push"], "each name one direction", id="pull-and-push"),
    ],
)
def test_a_watch_that_cannot_be_is_refused_before_it_starts(tmp_path: Path, args: list[str], message: str) -> None:
    laptop, server = _store(tmp_path, "laptop"), tmp_path / "server" / "afi.db"
    afi("remember", "fact", "we use metric units", "--name", "units", db=laptop)
    refused = afi("sync", str(server), "--watch", *args, db=laptop)
    assert refused.returncode == 2, refused.stdout
    assert message in " ".join(refused.stderr.split()), refused.stderr
    assert refused.stdout == "" and "afi: watching" not in refused.stderr
    assert not server.parent.exists() and len(_versions(laptop)) == 1  # nothing opened, nothing synced


def test_every_without_watch_and_a_watch_of_this_very_store_are_refused(tmp_path: Path) -> None:
    laptop = _store(tmp_path, "laptop")
    afi("remember", "fact", "we use metric units", "--name", "units", db=laptop)
    alone = afi("sync", str(tmp_path / "other.db"), "--every", "5m", db=laptop)
    assert alone.returncode == 2 and "--every says how often --watch syncs" in alone.stderr
    assert not (tmp_path / "other.db").exists()
    itself = afi("sync", str(laptop), "--watch", "--every", "1s", db=laptop)  # the first round says so: exit 2
    assert itself.returncode == 2 and "a store syncs with other stores" in itself.stderr, itself.stderr
    assert afi("sync", str(tmp_path / "missing" / "x.db"), "--watch", db=laptop).returncode == 2


def test_afi_diff_lists_the_conflicts_syncs_settle_until_an_edit_closes_them(tmp_path: Path) -> None:
    laptop, server = _store(tmp_path, "laptop"), _store(tmp_path, "server")
    afi("remember", "fact", "we use metric units", "--name", "units", db=laptop)
    assert afi("sync", str(server), db=laptop).returncode == 0
    assert afi("snapshot", "create", "before", db=laptop).returncode == 0
    time.sleep(0.01)
    afi("remember", "fact", "we use imperial units", "--name", "units", db=laptop)
    afi("remember", "fact", "we use SI units everywhere", "--name", "units", db=server)
    synced = afi("sync", str(server), "--json", db=laptop)
    assert synced.returncode == 0, synced.stderr
    report = json.loads(synced.stdout)
    [conflict] = report["pull"]["conflicts"] + report["push"]["conflicts"]
    winner, loser = conflict["kept"], conflict["retired"]
    shown = f"! /facts/units.md  ({winner} won over {loser} in a sync; kept in /history/{loser}.md)"
    for db in (laptop, server):
        quiet = afi("diff", "now", db=db)  # nothing changed between now and now: exit 0, the conflict listed
        assert quiet.returncode == 0 and quiet.stdout.splitlines()[1:] == [shown], quiet.stdout
    since = afi("diff", "before", db=laptop).stdout.splitlines()  # a change, then the conflict: exit 1 as before
    assert afi("diff", "before", db=laptop).returncode == 1
    assert len(since) == 3 and since[1].startswith("~ /facts/units.md  (") and since[2] == shown, since
    listed = json.loads(afi("diff", "before", "--json", db=laptop).stdout)["conflicts"]
    assert [(c["path"], c["id"], [x["id"] for x in c["losers"]]) for c in listed] == [
        ("/facts/units.md", winner, [loser])
    ]
    past = afi("diff", "before", "before", "--json", db=laptop)  # up to an instant gone by: no open conflicts then
    assert past.returncode == 0 and json.loads(past.stdout)["conflicts"] == []
    edited = afi("remember", "fact", "we use SI units, metres and litres", "--name", "units", db=server)
    assert edited.returncode == 0
    assert "!" not in afi("diff", "now", db=server).stdout
    assert afi("sync", str(server), db=laptop).returncode == 0
    after = afi("diff", "now", "--json", db=laptop)
    assert after.returncode == 0 and json.loads(after.stdout)["conflicts"] == []
    assert afi("cat", f"/history/{loser}.md", db=laptop).returncode == 0  # the version it lost to stays kept
