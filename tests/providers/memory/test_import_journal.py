"""An import's files written in place are taken back when it does not commit: at once when it is refused
midway, and by the next open of the store when its process was killed; a file written by someone else
since the crash is left alone, and nothing of the import stays in the root."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from afi.clients import LocalClient
from afi.errors import TooLarge
from afi.provider import Caller
from afi.providers.memory.journal import FileJournal
from afi.providers.memory.provider import MemoryProvider
from tests.support.cli import afi

OWNER = Caller(principal="local", space="default")
WRITES = [("a.txt", b"imported a"), ("b.txt", b"imported b"), ("new/deeper/c.txt", b"imported c")]


def _write_the_import(provider: MemoryProvider, journal: FileJournal | None, content: str) -> None:
    """An import's work: a note, and WRITES written in place, each journaled first."""
    assert journal is not None
    provider.remember(OWNER, kind="fact", name="imported", content=content)
    for rel, data in WRITES:
        journal.before_write(rel, data)
        provider.write(OWNER, f"/files/{rel}", data)


def _die(*_: object, **__: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _crash_midway(db: str, root: str) -> None:
    """In a process of its own: an import writes its files, then the process is killed before it commits."""
    provider = MemoryProvider(db, root)

    def run(journal: FileJournal | None) -> None:
        _write_the_import(provider, journal, "a note of the killed import")
        _die()

    provider.import_whole(OWNER, run, files=True)


def _notes(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return sorted(str(row[0]) for row in conn.execute("SELECT name FROM notes WHERE kind = 'fact'"))


def test_a_killed_imports_files_are_put_back_at_the_next_open_but_not_one_written_since(tmp_path: Path) -> None:
    db, root = tmp_path / "afi.db", tmp_path / "files"
    provider = MemoryProvider(db, root)  # open before the crash: the writer that comes after it
    client = LocalClient(provider, OWNER)
    client.write("/facts/kept.md", b"the store held this")
    client.write("/files/a.txt", b"old a")
    client.write("/files/b.txt", b"old b")
    child = multiprocessing.get_context("spawn").Process(target=_crash_midway, args=(str(db), str(root)))
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    assert (root / ".afi-claim-default").exists() and (root / "default" / "new").is_dir()  # what it left
    client.write("/files/b.txt", b"written by someone since")
    MemoryProvider(db, root)  # the next open
    assert (root / "default" / "a.txt").read_bytes() == b"old a"
    assert (root / "default" / "b.txt").read_bytes() == b"written by someone since"
    assert not (root / "default" / "new").exists()
    assert sorted(p.name for p in root.iterdir()) == ["default"]
    assert _notes(db) == ["kept"]


def test_an_import_refused_midway_puts_back_the_files_it_wrote_and_is_audited(store_url: str, tmp_path: Path
                                                                              ) -> None:  # fmt: skip
    root = tmp_path / "files"
    provider = MemoryProvider(store_url, root)
    LocalClient(provider, OWNER).write("/files/a.txt", b"old a")

    def run(journal: FileJournal | None) -> None:
        assert journal is not None
        for rel, data in WRITES:
            journal.before_write(rel, data)
            provider.write(OWNER, f"/files/{rel}", data)
        raise TooLarge("refused after the files were written")

    with pytest.raises(TooLarge):
        provider.import_whole(OWNER, run, files=True)
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == ["default", "default/a.txt"]
    assert (root / "default" / "a.txt").read_bytes() == b"old a"
    assert [(row["verb"], row["result"]) for row in provider.audit_log(limit=1)] == [("import", "too_large")]


def test_the_cli_refuses_an_import_past_the_quota_midway_and_keeps_the_files_there(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for n in range(6):  # each over the note cap: kept as /files/notes/<name>, 6,000 bytes
        (notes / f"Long {n}.md").write_text(f"long note {n} " + "x" * 5980)
    db = tmp_path / "afi.db"
    assert afi("import", str(notes), db=db).returncode == 0
    (notes / "Long 0.md").write_text("long note 0, changed " + "y" * 5980)
    (notes / "Long 5.md").write_text("long note 5, changed " + "z" * 12000)  # past the quota: refused
    before = {p: p.read_bytes() for p in sorted((tmp_path / "files").rglob("*")) if p.is_file()}
    done = afi("import", str(notes), db=db, env={"AFI_SPACE_QUOTA": "40000"})
    assert done.returncode == 2 and ": too_large: " in done.stderr and "Traceback" not in done.stderr, done.stderr
    after = {p: p.read_bytes() for p in sorted((tmp_path / "files").rglob("*")) if p.is_file()}
    assert after == before  # Long 0's new bytes, written first, were put back


def _crash_after_commit(db: str, root: str, where: str) -> None:
    """In a process of its own: an import commits, then the process is killed as it tidies up (as it
    removes its journal, or as it forgets its commit marker)."""
    from afi.providers.memory import import_verbs

    provider = MemoryProvider(db, root)

    def run(journal: FileJournal | None) -> None:
        _write_the_import(provider, journal, "a note of the committed import")

    if where == "journal":
        import_verbs.shutil.rmtree = _die  # type: ignore[assignment]
    else:
        import_verbs.forget_marker = _die  # type: ignore[assignment]
    provider.import_whole(OWNER, run, files=True)


@pytest.mark.parametrize("where", ["journal", "marker"])
def test_an_import_killed_after_it_committed_keeps_its_files_at_the_next_open(tmp_path: Path, where: str) -> None:
    db, root = tmp_path / "afi.db", tmp_path / "files"
    client = LocalClient(MemoryProvider(db, root), OWNER)
    client.write("/files/a.txt", b"old a")
    child = multiprocessing.get_context("spawn").Process(target=_crash_after_commit, args=(str(db), str(root), where))
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    assert (root / ".afi-claim-default").exists()  # killed before it let go of its claim
    MemoryProvider(db, root)  # the next open sweeps the claim: the import committed, nothing is undone
    assert _notes(db) == ["imported"]
    assert {rel: (root / "default" / rel).read_bytes() for rel, _ in WRITES} == dict(WRITES)
    assert sorted(p.name for p in root.iterdir()) == ["default"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM meta WHERE key LIKE 'import-committed:%'").fetchone()[0] == 0
