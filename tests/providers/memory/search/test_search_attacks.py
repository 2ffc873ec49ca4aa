"""Hostile searches against a live ``afi serve`` (issue 11): regex bombs, deep nesting, huge queries.

Each bomb is sent while a second client keeps asking for the manifest; every one of those requests
must be answered within :data:`LATENCY_LIMIT`, the bomb itself must be answered quickly, and the
server must not keep burning CPU once it has answered. Against the ``re``-based matcher this
replaced, every test here failed: ``(\\w+\\s?)+$X`` was answered after 13.9 s while every probe timed
out (5 s), a probe waited 1.8 s behind ``(.*e){12}X``, and ``(.*.*)*X`` never finished (the server
stayed at 100% CPU, answering nothing, after the client gave up). The SSH grep filtering piped
input with ``re`` failed 5 of its 6 bombs (``(\\w+\\s?)+$X`` 12.7 s, four past the 30 s timeout).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.servers import AfiServer, start_afi_serve
from tests.support.ssh import SshServer, ssh_server

LATENCY_LIMIT = 0.1  # seconds for a concurrent request while a hostile search runs
ANSWER_LIMIT = 2.0  # seconds for the hostile search itself
IDLE_CPU_LIMIT = 0.1  # CPU seconds the server may use in the settle window after answering
SETTLE = 0.4  # seconds of probing after the hostile search was answered

ORDINARY = "User prefers metric units: every measurement here, even the weather, uses metres and degrees Celsius"
BAIT = "a" * 26 + "!"  # (a+)+$ took 12.8 s on this line with the backtracking matcher

# The bombs the attacker used; each is catastrophic for a backtracking engine on the lines above.
BOMBS = [r"(\w+\s?)+$X", r"(.*e){12}X", r"(.*.*)*X", r"((.*)*)*X", r"(.*?){30}X", r"(a+)+$"]

# Syntax a linear-time engine cannot offer, and the words the refusal must use.
UNSUPPORTED = [
    (r"(a)\1", "backreferences"),
    (r"(?P<x>a)(?P=x)", "backreferences"),
    (r"\k<x>", "backreferences"),
    (r"metric(?= units)", "lookahead"),
    (r"metric(?! units)", "lookahead"),
    (r"(?<=User )prefers", "lookbehind"),
    (r"(?<!User )prefers", "lookbehind"),
    (r"me++tric", "possessive"),
    (r"(?>metric)", "atomic"),
]


@dataclass
class Fire:
    """What one hostile request got, and what the concurrent probe saw meanwhile."""

    response: httpx.Response | None
    error: BaseException | None
    elapsed: float
    latencies: list[float] = field(default_factory=list)
    idle_cpu: float = 0.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    base = tmp_path_factory.mktemp("search-attacks")
    with start_afi_serve(base / "afi.db", base / "files") as running:
        for name, body in (("units", ORDINARY), ("bait", BAIT)):
            answer = httpx.put(f"{running.url}/afi/write", params={"path": f"/facts/{name}.md"}, content=body)
            assert answer.status_code == 200, answer.text
        yield running


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _under_fire(server: AfiServer, attack: Callable[[httpx.Client], httpx.Response]) -> Fire:
    """Fire twice if the first fire was not calm; return the calmer one.

    The machine is shared, so one probe can miss :data:`LATENCY_LIMIT` by scheduling alone; a
    matcher that holds the GIL misses it on every fire (the replaced one by seconds each time).
    """
    first = _fire_once(server, attack)
    if _calm(first):
        return first
    second = _fire_once(server, attack)
    return second if _calm(second) else first


def _calm(fire: Fire) -> bool:
    try:
        _assert_calm(fire)
    except AssertionError:
        return False
    return True


def _fire_once(server: AfiServer, attack: Callable[[httpx.Client], httpx.Response]) -> Fire:
    """Run ``attack`` in a thread while probing the manifest every 20 ms until SETTLE after it ends."""
    assert server.process is not None
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        started = time.perf_counter()
        try:
            with httpx.Client(base_url=server.url, timeout=15) as client:
                outcome["response"] = attack(client)
        except BaseException as err:  # a timeout is an outcome here, judged by the asserts
            outcome["error"] = err
        outcome["elapsed"] = time.perf_counter() - started
        done.set()

    latencies: list[float] = []
    with httpx.Client(base_url=server.url, timeout=5) as probe:
        probe.get("/.afi/manifest.json").raise_for_status()  # warm the connection
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        settle_from: float | None = None
        cpu_before = 0.0
        while settle_from is None or time.monotonic() - settle_from < SETTLE:
            started = time.perf_counter()
            try:
                probe.get("/.afi/manifest.json").raise_for_status()
                latencies.append(time.perf_counter() - started)
            except httpx.TimeoutException:
                latencies.append(float("inf"))
            if settle_from is None and done.is_set():
                settle_from, cpu_before = time.monotonic(), _cpu_seconds(server.process.pid)
            time.sleep(0.02)
        idle_cpu = _cpu_seconds(server.process.pid) - cpu_before
        thread.join(30)
    return Fire(outcome.get("response"), outcome.get("error"), outcome["elapsed"], latencies, idle_cpu)


def _search(body: dict[str, Any]) -> Callable[[httpx.Client], httpx.Response]:
    return lambda client: client.post("/afi/search", json=body)


def _assert_calm(fire: Fire) -> None:
    assert fire.error is None, f"the hostile request failed: {fire.error!r}"
    assert fire.elapsed < ANSWER_LIMIT, f"answered in {fire.elapsed:.2f} s (limit {ANSWER_LIMIT} s)"
    slow = [round(x, 3) for x in fire.latencies if x >= LATENCY_LIMIT]
    assert len(fire.latencies) >= 5 and not slow, f"{len(slow)} of {len(fire.latencies)} probes were slow: {slow}"
    assert fire.idle_cpu < IDLE_CPU_LIMIT, f"the server used {fire.idle_cpu:.2f} s of CPU after answering"


@pytest.mark.parametrize("bomb", BOMBS)
def test_regex_bombs_leave_the_server_responsive(server: AfiServer, bomb: str) -> None:
    fire = _under_fire(server, _search({"query": {"regex": bomb}}))
    _assert_calm(fire)
    assert fire.response is not None and fire.response.status_code == 200, fire.response
    # none of these can match the lines stored, bar a note's random 12-hex id that ends in "a" ((a+)+$)
    matches = [m for m in fire.response.json()["matches"] if not m["text"].startswith("id: ")]
    assert matches == []


def test_every_bomb_in_one_figure(server: AfiServer) -> None:
    """The figures in one place: cases tried, failures (must be zero), the slowest probe and answer."""
    failures, slowest_probe, slowest_answer = [], 0.0, 0.0
    for bomb in BOMBS:
        for flags in ("", "i"):
            fire = _under_fire(server, _search({"query": {"regex": bomb, "flags": flags}, "path": "/"}))
            slowest_probe = max(slowest_probe, *fire.latencies)
            slowest_answer = max(slowest_answer, fire.elapsed)
            try:
                _assert_calm(fire)
            except AssertionError as err:
                failures.append(f"{bomb!r}/{flags}: {err}")
    cases = len(BOMBS) * 2
    print(f"bombs: {cases} cases, {len(failures)} failures; slowest probe {slowest_probe * 1000:.1f} ms, "
          f"slowest answer {slowest_answer * 1000:.1f} ms")  # fmt: skip
    assert failures == [], f"{len(failures)} of {cases} cases failed: {failures}"


def test_a_thousand_deep_nesting_is_refused_with_a_clear_message(server: AfiServer) -> None:
    fire = _under_fire(server, _search({"query": {"regex": "(" * 1000 + "a" + ")" * 1000}}))
    _assert_calm(fire)
    assert fire.response is not None and fire.response.status_code == 400
    error = fire.response.json()["error"]
    assert error["code"] == "invalid_path"
    assert "nest" in error["message"] and "1,000" in error["message"] and "100" in error["message"], error


@pytest.mark.parametrize(
    "query", [{"query": "x" * 5_000_000}, {"query": {"regex": "x" * 5_000_000}}], ids=["exact", "regex"]
)
def test_a_five_megabyte_query_is_refused_quickly(server: AfiServer, query: dict[str, Any]) -> None:
    body = json.dumps(query).encode()
    fire = _under_fire(
        server, lambda client: client.post("/afi/search", content=body, headers={"content-type": "application/json"})
    )
    _assert_calm(fire)
    assert fire.response is not None and fire.response.status_code == 413
    error = fire.response.json()["error"]
    assert error["code"] == "too_large" and "4,096" in error["message"] and "5,000,000" in error["message"], error


@pytest.mark.parametrize(("regex", "words"), UNSUPPORTED, ids=[r for r, _ in UNSUPPORTED])
def test_backtracking_only_syntax_is_refused_in_words_a_person_understands(
    server: AfiServer, regex: str, words: str
) -> None:
    answer = httpx.post(f"{server.url}/afi/search", json={"query": {"regex": regex}}, timeout=5)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "invalid_path"
    assert error["message"].startswith("the search query is invalid: "), error
    assert words in error["message"] and "RE2" in error["message"], error


def test_ordinary_regex_search_still_finds_its_lines(server: AfiServer) -> None:
    cases = {
        r"(?<unit>metric) units": 1,
        r"\bdegrees\s+celsius\b": 0,
        r"METRES": 0,
        r"^a{26}!$": 1,
        r"\u0055ser": 1,
    }
    for regex, found in cases.items():
        answer = httpx.post(f"{server.url}/afi/search", json={"query": {"regex": regex}, "path": "/facts"}, timeout=5)
        assert answer.status_code == 200, (regex, answer.text)
        assert len(answer.json()["matches"]) == found, (regex, answer.json())
    answer = httpx.post(f"{server.url}/afi/search", json={"query": {"regex": "METRES", "flags": "i"}, "path": "/facts"})
    assert [m["path"] for m in answer.json()["matches"]] == ["/facts/units.md"]


def test_a_glob_over_the_limit_is_a_clear_invalid_path(server: AfiServer) -> None:
    for folder in ("/facts", "/history", "/files", "/"):
        answer = httpx.get(f"{server.url}/afi/list", params={"path": folder, "glob": "x" * 50_001}, timeout=5)
        assert answer.status_code == 400, (folder, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "invalid_path" and "4,096" in error["message"], error


# -- the SSH door: its grep filters piped input with its own matcher ------------------------------


@pytest.fixture(scope="module")
def ssh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    with ssh_server(tmp_path_factory.mktemp("ssh-attacks"), "--conn-rate", "0", "--cmd-rate", "0") as running:
        # a workspace file, not a note: a note's front matter (a random id) could match a bomb by chance
        assert running.ssh("echo '" + BAIT + "' > /files/bait.txt").code == 0
        yield running


@pytest.mark.parametrize("bomb", BOMBS)
def test_ssh_grep_bombs_on_piped_input_and_on_the_tree_answer_quickly(ssh: SshServer, bomb: str) -> None:
    quoted = "'" + bomb + "'"
    for line in (f"grep -E {quoted}", f"cat /files/bait.txt | grep -E {quoted}", f"grep -rE {quoted} /files"):
        started = time.perf_counter()
        run = ssh.ssh(line, stdin=(ORDINARY + "\n" + BAIT + "\n").encode(), timeout=30)
        elapsed = time.perf_counter() - started
        assert run.code == 1 and run.out == b"", (line, run)  # no line matches: GNU grep's status 1
        assert elapsed < ANSWER_LIMIT + 1, f"{line}: {elapsed:.2f} s"  # + the ssh client's own start


def test_ssh_grep_refuses_backreferences_in_words(ssh: SshServer) -> None:
    run = ssh.ssh(r"grep -E '(a)\1'", stdin=b"aa\n")
    assert run.code == 2 and "backreferences" in run.err and "RE2" in run.err, run
