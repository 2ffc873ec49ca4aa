"""``kill -9`` in the middle of ``afi import`` (a bundle, a Markdown folder), ``afi space fork`` and
``afi gc``: afterwards the store is untouched or complete, never half-written, and a rerun works.

Each run is the real CLI in its own process, killed at a random moment (seeded, so a failure can be
replayed) between the end of its start-up (the time ``afi <command> -h`` takes) and the time an
uninterrupted run of the same command took. After each
kill the target is looked at: untouched (then the command is run again, and must finish whole) or
complete (what the uninterrupted run wrote). Figures: trials per command, kills that landed mid-run,
failures (zero).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from afi.clients import LocalClient
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support.warm import AFI, AfiPopen

TRIALS = 7
SEED = 15


def _env(db: Path, root: Path) -> dict[str, str]:
    environ = {**os.environ, "AFI_DB": str(db), "AFI_ROOT": str(root), "COLUMNS": "200"}
    environ.pop("AFI_SPACE", None)
    return environ


def _run(args: list[str], db: Path, root: Path, kill_after: float | None = None) -> tuple[int, str, bool]:
    """Run ``afi args``; with ``kill_after``, SIGKILL it then if still running. Returns (code, stderr, killed)."""
    proc = AfiPopen([str(AFI), *args], env=_env(db, root), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True)  # fmt: skip
    killed = False
    if kill_after is not None:
        try:
            proc.wait(kill_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            killed = True
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err, killed


def _start_up(command: str, db: Path, root: Path) -> float:
    """Seconds ``afi <command> -h`` takes: a kill before then lands before the command has begun its work."""
    started = time.monotonic()
    code, err, _ = _run([command, "-h"], db, root)
    assert code == 0, err
    return time.monotonic() - started


def _build(db: Path, root: Path) -> None:
    provider = MemoryProvider(db, root)
    src = LocalClient(provider, Caller(principal="local", space="src"))
    for n in range(150):
        src.write(f"/facts/fact-{n:03}.md", f"fact {n}: the okapi gate opens at {n} o'clock".encode())
    for n in range(150):
        src.write(f"/files/dir{n % 6}/file-{n:03}.txt", f"first bytes of {n}\n".encode() * 40)
        src.write(f"/files/dir{n % 6}/file-{n:03}.txt", f"second bytes of {n}\n".encode() * 40)
    messages = [{"role": "user", "text": f"line {n}", "entry_id": f"m{n}"} for n in range(50)]
    provider.ledger_write(Caller(principal="local", space="src"), "append", "s1", {"messages": messages})


def _state(db: Path, root: Path, space: str) -> tuple[int, int, int, int, tuple[str, ...]]:
    """(note rows, file versions, ledger sessions, indexed files, files on disk) of a space."""
    with sqlite3.connect(db) as conn:
        notes = conn.execute("SELECT count(*) FROM notes WHERE resource_id = ?", (space,)).fetchone()[0]
        versions = conn.execute("SELECT count(*) FROM file_versions WHERE space = ?", (space,)).fetchone()[0]
        sessions = conn.execute("SELECT count(*) FROM ledger_sessions WHERE space = ?", (space,)).fetchone()[0]
        indexed = conn.execute("SELECT count(*) FROM workspace_files WHERE space = ?", (space,)).fetchone()[0]
    folder = root / space
    on_disk = (
        tuple(sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())) if folder.is_dir() else ()
    )
    return int(notes), int(versions), int(sessions), int(indexed), on_disk


def _stray(root: Path) -> list[str]:
    """What an interrupted command left in the root beside the spaces' folders."""
    return (
        sorted(p.name for p in root.iterdir() if p.name.startswith((".afi-import-", ".afi-claim-")))
        if root.is_dir()
        else []
    )


def _copy(base: Path, into: Path) -> tuple[Path, Path]:
    into.mkdir()
    # through SQLite: the store as committed (its WAL included), whatever is checkpointed yet
    with sqlite3.connect(base / "afi.db") as source, sqlite3.connect(into / "afi.db") as target:
        source.backup(target)
    if (base / "files").is_dir():
        shutil.copytree(base / "files", into / "files")
    return into / "afi.db", into / "files"


def _trials(tmp_path: Path, name: str, prepare: Callable[[Path], tuple[Path, Path]], args: list[str],
            space: str) -> None:  # fmt: skip
    """Run ``args`` whole once (the reference), then TRIALS times killed at random; check each."""
    db, root = prepare(tmp_path / f"{name}-reference")
    untouched = _state(db, root, space)
    started = time.monotonic()
    code, err, _ = _run(args, db, root)
    took = time.monotonic() - started
    assert code == 0, err
    begins = _start_up(args[0], db, root)
    complete = _state(db, root, space)
    assert complete != untouched
    rng = random.Random(SEED)
    failures: list[str] = []
    landed = 0
    for trial in range(TRIALS):
        db, root = prepare(tmp_path / f"{name}-{trial}")
        delay = rng.uniform(begins, took * 0.9)
        code, err, killed = _run(args, db, root, kill_after=delay)
        landed += killed
        after = _state(db, root, space)
        # the rows are untouched or complete; files on disk beside untouched rows are a killed run's
        # leftovers, which the rerun must clear
        if after[:4] not in (untouched[:4], complete[:4]) or (after[:4] == complete[:4] and after != complete):
            failures.append(f"trial {trial} (killed at {delay:.2f} s): half-written: {after[:4]}, {len(after[4])} "
                            f"files on disk (untouched {untouched[:4]}, complete {complete[:4]})")  # fmt: skip
            continue
        code, err, _ = _run(args, db, root)  # untouched: it must finish whole; complete: refused or idempotent
        if _state(db, root, space) != complete or (code != 0 and "not empty" not in err):
            failures.append(f"trial {trial}: the rerun after the kill (exit {code}) left {_state(db, root, space)[:4]}"
                            f": {err.strip()[-300:]}")  # fmt: skip
        if _stray(root):
            failures.append(f"trial {trial} (killed at {delay:.2f} s): the rerun left {_stray(root)} in the root")
    print(f"{name}: {TRIALS} trials, {landed} killed mid-run (a whole run took {took:.2f} s, its start-up "
          f"{begins:.2f} s), {len(failures)} failures")  # fmt: skip
    assert landed >= TRIALS // 3, f"only {landed} of {TRIALS} kills landed mid-run"
    assert failures == [], f"{name}: {TRIALS} trials, {landed} killed mid-run, {len(failures)} failures:\n" + "\n".join(
        failures
    )


def fresh(folder: Path) -> tuple[Path, Path]:
    """An empty store (its schema made) and root."""
    folder.mkdir()
    MemoryProvider(folder / "afi.db", folder / "files")
    return folder / "afi.db", folder / "files"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("built")
    _build(base / "afi.db", base / "files")
    return base


@pytest.fixture(scope="module")
def bundle(built: Path) -> Path:
    code, err, _ = _run(["export", "-o", str(built / "bundle"), "--space", "src"], built / "afi.db", built / "files")
    assert code == 0, err
    return built / "bundle"


@pytest.mark.slow
def test_kill_9_during_a_bundle_import(tmp_path: Path, bundle: Path) -> None:
    _trials(tmp_path, "import", fresh, ["import", str(bundle)], "src")


@pytest.mark.slow
def test_kill_9_during_a_space_fork(tmp_path: Path, built: Path) -> None:
    _trials(tmp_path, "fork", lambda folder: _copy(built, folder), ["space", "fork", "src", "dst"], "dst")


@pytest.mark.slow
def test_kill_9_during_gc(tmp_path: Path, built: Path) -> None:
    _trials(tmp_path, "gc", lambda folder: _copy(built, folder), ["gc", "--keep-days", "0"], "src")


@pytest.mark.slow
def test_kill_9_during_a_markdown_import(tmp_path: Path) -> None:
    source = tmp_path / "notes"
    source.mkdir()
    for n in range(400):
        (source / f"Note {n:03}.md").write_text(
            f"---\ntags: [t{n % 7}]\n---\nokapi note {n}, see [[Note {(n + 1) % 400:03}]]\n"
        )

    db, root = fresh(tmp_path / "reference")
    started = time.monotonic()
    assert _run(["import", str(source)], db, root)[0] == 0
    took = time.monotonic() - started
    begins = _start_up("import", db, root)
    complete = _state(db, root, "default")
    rng = random.Random(SEED)
    failures: list[str] = []
    landed = 0
    for trial in range(TRIALS):
        db, root = fresh(tmp_path / f"md-{trial}")
        code, err, killed = _run(["import", str(source)], db, root, kill_after=rng.uniform(begins, took * 0.9))
        landed += killed
        code, err, _ = _run(["import", str(source)], db, root)  # resumable: the rerun finishes it
        after = _state(db, root, "default")
        if code != 0 or after[0] != complete[0]:
            failures.append(f"trial {trial}: after the rerun {after[:4]} (complete {complete[:4]}): {err[-300:]}")
    print(f"markdown import: {TRIALS} trials, {landed} killed mid-run, {len(failures)} failures")
    assert landed >= TRIALS // 3 and failures == [], failures


def test_a_claim_held_by_a_live_import_is_a_conflict_and_a_released_one_is_free(tmp_path: Path) -> None:
    from afi.errors import Conflict
    from afi.providers.memory.claims import SpaceClaim

    first, second = SpaceClaim(tmp_path, "dst"), SpaceClaim(tmp_path, "dst")
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "kept.txt").write_text("the store holds rows of this space")
    first.take(lambda: False)
    with pytest.raises(Conflict, match="another import or fork"):
        second.take(lambda: True)
    first.release()
    second.take(lambda: True)  # released: nothing to undo, the folder stays
    assert (tmp_path / "dst" / "kept.txt").exists()
    second.release()
    assert not list(tmp_path.glob(".afi-claim-*"))
