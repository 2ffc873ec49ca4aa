"""``/files`` against a model of the tree, through every door: nothing answers for a file that is gone.

Random sequences of writes, overwriting moves, deletes and folder deletes go through HTTP, MCP, SSH
(the ``afi`` subsystem through OpenSSH) and the FUSE mount of one store (SQLite, as ``make run``
makes it). After each step, stat, list and read agree with a dict of path → text, and so do the
three search modes: an exact and a regex search for every word ever written find exactly the files
holding it now, once each (no ``/history`` copy), and a semantic search finds no file that is gone
and no text a file no longer holds.

Each file's text is words of its own (``w<n>x``), so a word names the writes that held it.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import pytest

from afi.clients import HttpClient
from afi.clients.base import AfiClient
from afi.clients.fs import FsClient
from afi.clients.mcp import McpClient
from afi.clients.ssh import SshClient
from afi.errors import Conflict, NotFound
from tests.support.doors import Doors, served_doors
from tests.support.fuse import afi_mount, needs_fuse

NAMES = ("a.md", "b.txt", "c")
FOLDERS = ("x", "y/z")
STEPS = {"http": 40, "mcp": 25, "ssh": 20, "fuse": 25}


@dataclass
class Model:
    """The tree a door should show under its own folder: path → text, and every word ever written."""

    base: str
    files: dict[str, str] = field(default_factory=dict)
    words: set[str] = field(default_factory=set)
    counter: int = 0

    def paths(self) -> list[str]:
        return [f"{self.base}/{folder}/{name}" for folder in FOLDERS for name in NAMES]

    def text(self) -> str:
        self.counter += 1
        word = f"w{self.counter}x"
        self.words.add(word)
        return f"{word} is the note of write {self.counter}\nsecond line {word} kept for search\n"


@dataclass
class Tally:
    steps: int = 0
    checks: int = 0
    failures: list[str] = field(default_factory=list)

    def expect(self, ok: bool, what: str) -> None:
        self.checks += 1
        if not ok:
            self.failures.append(what)


def _step(client: AfiClient, model: Model, rng: random.Random) -> str:
    live = sorted(model.files)
    roll = rng.random()
    if roll < 0.45 or not live:
        path = rng.choice(model.paths())
        text = model.text()
        with contextlib.suppress(Conflict):  # a filesystem makes no parents on its own
            client.mkdir(path.rsplit("/", 1)[0], parents=True)
        client.write(path, text.encode())
        model.files[path] = text
        return f"write {path}"
    if roll < 0.7:
        source = rng.choice(live)
        target = rng.choice([p for p in model.paths() if p != source])
        client.move(source, target, overwrite=True)
        model.files[target] = model.files.pop(source)
        return f"move {source} -> {target} (overwrite)"
    if roll < 0.9:
        path = rng.choice(live)
        client.delete(path)
        del model.files[path]
        return f"delete {path}"
    folder = f"{model.base}/{rng.choice(FOLDERS)}"
    if any(p.startswith(folder + "/") for p in live):
        client.delete(folder, recursive=True)
        for path in [p for p in live if p.startswith(folder + "/")]:
            del model.files[path]
    return f"delete -r {folder}"


def _check(client: AfiClient, model: Model, tally: Tally, step: str) -> None:
    for path in model.paths():
        if path in model.files:
            tally.expect(client.read(path).data == model.files[path].encode(), f"{step}: read {path}")
        else:
            try:
                client.stat(path)
                tally.expect(False, f"{step}: stat {path} found a file the model deleted")
            except NotFound:
                tally.expect(True, "")
    for folder in FOLDERS:
        want = sorted(p.rsplit("/", 1)[1] for p in model.files if p.rsplit("/", 1)[0] == f"{model.base}/{folder}")
        try:
            got = sorted(
                e.path.rsplit("/", 1)[1] for e in client.list(f"{model.base}/{folder}").entries if e.type == "file"
            )
        except NotFound:
            got = []
        tally.expect(got == want, f"{step}: list {folder}: {got} != {want}")
    for word in sorted(model.words):
        holding = sorted(p for p, text in model.files.items() if word in text)
        for query in (word, {"regex": re.escape(word)}):
            found = [m.path for m in client.search(query, path="/", limit=100).matches if m.path.startswith(model.base)]
            tally.expect(sorted(set(found)) == holding, f"{step}: search {query} over /: {found} != {holding}")
            tally.expect(all(p.startswith("/files/") for p in found), f"{step}: {query} answered outside /files")
        semantic = client.search({"semantic": f"which note holds {word}"}, path=model.base, limit=50).matches
        for match in semantic:
            now = model.files.get(match.path)
            tally.expect(now is not None, f"{step}: semantic {word} answered {match.path}, which is gone")
            tally.expect(now is None or match.text in now, f"{step}: semantic {word} answered text {match.path} lost")
        if holding:
            tally.expect(holding[0] in [m.path for m in semantic], f"{step}: semantic {word} missed {holding[0]}")


def _run(client: AfiClient, door: str, seed: int) -> Tally:
    rng = random.Random(seed)
    model = Model(f"/files/model-{door}")
    tally = Tally()
    for _ in range(STEPS[door]):
        step = _step(client, model, rng)
        tally.steps += 1
        _check(client, model, tally, step)
    return tally


@pytest.fixture(scope="module")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Doors]:
    with served_doors(tmp_path_factory.mktemp("model")) as served:
        yield served


def _report(door: str, tally: Tally) -> None:
    print(f"{door}: {tally.steps} steps, {tally.checks} checks, failures: {len(tally.failures)}")
    assert tally.failures == [], tally.failures[:10]
    assert tally.steps == STEPS[door] and tally.checks > 20 * tally.steps


def test_the_http_door_agrees_with_the_model(doors: Doors) -> None:
    with HttpClient(doors.http, doors.token) as client:
        _report("http", _run(client, "http", 1))


def test_the_mcp_door_agrees_with_the_model(doors: Doors) -> None:
    client = McpClient.http(doors.http + "/mcp", doors.token)
    try:
        _report("mcp", _run(client, "mcp", 2))
    finally:
        client.close()


def test_the_ssh_door_agrees_with_the_model(doors: Doors) -> None:
    client = SshClient(port=doors.ssh_port, identity=doors.ssh_key)
    try:
        _report("ssh", _run(client, "ssh", 3))
    finally:
        client.close()


@needs_fuse
def test_the_mount_agrees_with_the_model(doors: Doors) -> None:
    (doors.base / "writer.key").write_text(doors.token + "\n")
    with ExitStack() as stack:
        mount = stack.enter_context(
            afi_mount(doors.base / "mnt", doors.db, doors.root, "--token", str(doors.base / "writer.key"))
        )
        _report("fuse", _run(FsClient(mount.path), "fuse", 4))
