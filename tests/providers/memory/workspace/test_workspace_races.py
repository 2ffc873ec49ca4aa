"""The workspace under attack: a folder swapped for a symlink to the outside while the provider writes.

A process that can change the workspace on disk could replace a folder with a symlink between the
jail's check and the write. Writes, deletes and moves name their files relative to a folder
descriptor reached without following symlinks, so nothing outside the root is ever touched. Each test
races for a fixed number of rounds; the path-based code these replaced lost such races within a few
hundred of them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from afi.errors import AfiError
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider

OWNER = Caller(principal="local", space="default")
ROUNDS = 1500


@pytest.fixture(autouse=True, params=["openat2", "descriptor-walk"])
def jail_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every race runs with the kernel's openat2 and with the portable descriptor walk."""
    from afi.providers.memory.workspace import jail as jail_module

    if request.param == "descriptor-walk":
        monkeypatch.setattr(jail_module._openat2, "_syscall", None)
    elif jail_module._openat2._syscall is None:
        pytest.skip("this kernel or platform has no openat2")
    return str(request.param)


@pytest.fixture
def provider(memory_provider: MemoryProvider) -> Iterator[MemoryProvider]:
    memory_provider.write(OWNER, "/files/d/keep.txt", b"inside")
    yield memory_provider


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The space's folder on disk; ``d`` in it is the folder the attack swaps."""
    return tmp_path / "files" / "default"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the root that nothing done through the provider may touch."""
    folder = tmp_path / "outside"
    folder.mkdir()
    return folder


def _race(workspace: Path, outside: Path, attempt: Callable[[], None]) -> None:
    """Swap ``workspace/d`` between a real folder and a symlink to ``outside`` while ``attempt`` runs.

    When the provider re-creates ``d`` in the instant it is missing (a write makes missing parents),
    the swapper moves that folder aside and goes on.
    """
    real, link = workspace / "d.real", workspace / "d"
    stop = threading.Event()
    spares = itertools.count()

    def retire() -> None:
        with contextlib.suppress(FileNotFoundError):
            os.rename(link, workspace / f"spare-{next(spares)}")

    def swapper() -> None:
        while not stop.is_set():
            os.rename(link, real)  # ``d`` is the real folder here, and ``d.real`` absent
            try:
                os.symlink(outside, link)
            except FileExistsError:  # the provider made a new ``d`` in that instant
                retire()
            else:
                time.sleep(0)  # let the provider run while ``d`` is the symlink
                os.unlink(link)
            while True:
                try:
                    os.rename(real, link)
                    break
                except OSError:  # the provider made a new ``d`` meanwhile
                    retire()
            time.sleep(0)  # ... and while it is the real folder

    thread = threading.Thread(target=swapper)
    thread.start()
    try:
        for _ in range(ROUNDS):
            with contextlib.suppress(AfiError):  # refused, or lost the race cleanly
                attempt()
    finally:
        stop.set()
        thread.join()


def test_writes_never_land_outside(provider: MemoryProvider, workspace: Path, outside: Path) -> None:
    _race(workspace, outside, lambda: provider.write(OWNER, "/files/d/f.txt", b"payload"))
    assert sorted(os.listdir(outside)) == []


def test_deletes_never_remove_outside(provider: MemoryProvider, workspace: Path, outside: Path) -> None:
    (outside / "precious").mkdir()
    (outside / "precious" / "data.txt").write_text("keep me")

    def attempt() -> None:
        with contextlib.suppress(OSError):  # put a folder of that name back inside, when ``d`` is real
            os.mkdir(workspace / "d.real" / "precious")
        provider.delete(OWNER, "/files/d/precious", recursive=True)

    _race(workspace, outside, attempt)
    assert (outside / "precious" / "data.txt").read_text() == "keep me"


def test_moves_never_take_from_outside(provider: MemoryProvider, workspace: Path, outside: Path) -> None:
    (outside / "secret.txt").write_text("s")
    _race(workspace, outside, lambda: provider.move(OWNER, "/files/d/secret.txt", "/files/stolen.txt"))
    assert (outside / "secret.txt").read_text() == "s"
    assert not (workspace / "stolen.txt").exists()


def test_listings_and_stats_never_show_outside(provider: MemoryProvider, workspace: Path, outside: Path) -> None:
    (outside / "secret-name.txt").write_text("s")
    seen: set[str] = set()

    def attempt() -> None:
        seen.update(e.path for e in provider.list(OWNER, "/files/d").entries)
        with contextlib.suppress(AfiError):
            seen.add(provider.stat(OWNER, "/files/d/secret-name.txt").path)
        with contextlib.suppress(AfiError):
            seen.add(provider.read(OWNER, "/files/d/secret-name.txt").data.decode())

    _race(workspace, outside, attempt)
    assert "/files/d/keep.txt" in seen
    assert not any("secret" in item or item == "s" for item in seen)


def test_the_fabric_tools_never_reach_outside(provider: MemoryProvider, workspace: Path, outside: Path) -> None:
    """memory.view and memory.insert, given the same folder to race over."""
    from afi.providers.memory import create_fabric_tools

    (outside / "secret-name.txt").write_text("s")
    session = _Session("s1")
    provider.fabric(OWNER.space).attach(session)
    tools = {tool.name: tool for tool in create_fabric_tools(provider, OWNER)}
    seen: set[str] = set()

    def attempt() -> None:
        with contextlib.suppress(AfiError):
            seen.update(e["name"] for e in tools["memory.view"].run(session, {"path": "d"})["entries"])
        with contextlib.suppress(AfiError):
            tools["memory.insert"].run(session, {"path": "d/log.md", "text": "a line"})

    _race(workspace, outside, attempt)
    assert "keep.txt" in seen and "secret-name.txt" not in seen
    assert sorted(os.listdir(outside)) == ["secret-name.txt"]


@dataclasses.dataclass(frozen=True)
class _Session:
    id: str

    def entries(self) -> list[dict[str, object]]:
        return []
