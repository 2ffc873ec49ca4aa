"""A store's workspace belongs to that store: a new ``--db`` is a new, empty memory.

Each test runs the real ``afi`` console script with its own per-user data directory
(``XDG_DATA_HOME``) whose default store already holds a workspace file, and without ``AFI_ROOT``
unless it says so, as a user who passes only ``--db`` does.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.support import warm
from tests.support.warm import AFI


def _afi(*args: str, home: Path, root: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(home / "data"), "COLUMNS": "200"}
    for name in ("AFI_DB", "AFI_ROOT", "AFI_SPACE"):
        env.pop(name, None)
    if root is not None:
        env["AFI_ROOT"] = str(root)
    return warm.run([str(AFI), *args], capture_output=True, text=True, env=env, timeout=60, check=False,
                    cwd=home)  # fmt: skip


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A user whose default store's workspace holds ``/files/mine.txt``."""
    default_files = tmp_path / "data" / "afi" / "files" / "default"
    default_files.mkdir(parents=True)
    (default_files / "mine.txt").write_text("the default store's file\n")
    assert _afi("ls", "/files", home=tmp_path).stdout.split() == ["mine.txt"]
    return tmp_path


def test_a_new_db_is_a_new_empty_memory(home: Path) -> None:
    listed = _afi("ls", "/files", "--db", "new/store.db", home=home)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == []
    assert (home / "new" / "store.files").is_dir()
    status = _afi("db", "status", "--db", "new/store.db", home=home)
    assert f"root: {home / 'new' / 'store.files'}" in status.stdout


def test_the_readme_import_into_another_db_works(home: Path) -> None:
    assert _afi("remember", "fact", "User prefers metric units", "--name", "units", home=home).returncode == 0
    exported = _afi("export", "-o", "backup/", home=home)
    assert exported.returncode == 0, exported.stderr
    imported = _afi("import", "backup/", "--db", "other.db", home=home)
    assert imported.returncode == 0, imported.stderr
    assert _afi("ls", "/files", "--db", "other.db", home=home).stdout.split() == ["mine.txt"]
    assert "User prefers metric units" in _afi("cat", "/facts/units.md", "--db", "other.db", home=home).stdout
    assert (home / "other.files" / "default" / "mine.txt").read_text() == "the default store's file\n"


def test_a_root_given_once_is_recorded_by_the_store(home: Path) -> None:
    chosen = home / "elsewhere"
    (chosen / "default").mkdir(parents=True)
    (chosen / "default" / "a.txt").write_text("a\n")
    assert _afi("ls", "/files", "--db", "x.db", "--root", str(chosen), home=home).stdout.split() == ["a.txt"]
    assert _afi("ls", "/files", "--db", "x.db", home=home).stdout.split() == ["a.txt"]
    via_env = _afi("ls", "/files", "--db", "x.db", home=home, root=home / "third")
    assert via_env.stdout.split() == [], "an explicit root still wins for that command"
    assert _afi("ls", "/files", "--db", "x.db", home=home).stdout.split() == ["a.txt"], "and the record stays"


def test_a_store_made_before_keeps_the_per_user_workspace(home: Path) -> None:
    """A store with content at schema step 11 used ``<data dir>/files`` whatever its path: it still does."""
    old = home / "old.db"
    assert _afi("remember", "fact", "an old fact", "--db", str(old), home=home).returncode == 0
    with sqlite3.connect(old) as conn:  # as the code before the step left it: no step 12, no record
        conn.execute("DELETE FROM schema_version WHERE number >= 12")
        conn.execute("DELETE FROM meta WHERE key = 'workspace_root'")
    (home / "old.files").rmdir()
    listed = _afi("ls", "/files", "--db", str(old), home=home)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["mine.txt"]
    assert not (home / "old.files").exists()


def test_status_of_a_store_not_created_yet_creates_nothing(home: Path) -> None:
    shown = _afi("db", "status", "--db", "later.db", home=home)
    assert shown.returncode == 0, shown.stderr
    assert "not created yet" in shown.stdout and f"root: {home / 'later.files'}" in shown.stdout
    assert not (home / "later.db").exists() and not (home / "later.files").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        pytest.param(("ls", "/", "--db", "somedir/"), "this is a folder; --db names the store's file", id="db-folder"),
        pytest.param(("ls", "/", "--db", "notadb.db"), "this file is not a SQLite database", id="db-text-file"),
        pytest.param(("ls", "/", "--db", "/proc/x.db"), "cannot open or create the store here", id="db-in-proc"),
        pytest.param(("export", "-o", "/proc/nope"), "cannot write the bundle there", id="export-into-proc"),
        pytest.param(("export", "-o", "notadb.db"), "a file of that name exists", id="export-onto-a-file"),
        pytest.param(("ls", "/", "--root", "notadb.db"), "cannot create the workspace folder", id="root-a-file"),
    ],
)
def test_a_bad_store_or_destination_is_one_line_not_a_traceback(home: Path, args: tuple[str, ...], says: str) -> None:
    (home / "somedir").mkdir()
    (home / "notadb.db").write_text("hello, I am text\n")
    result = _afi(*args, home=home)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and len(lines) == 1, result.stderr
    assert lines[0].startswith("afi: ") and says in lines[0], lines[0]
    assert (home / "notadb.db").read_text() == "hello, I am text\n"
