"""No code outside ``afi/storage`` and the per-engine query modules asks which engine a store is on:
it asks ``database.engine`` (``afi.storage.engine``) what to do. A grep of the sources enforces it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("afi", "providers", "bindings")

# what asks which engine a store is on
BRANCHES = (
    re.compile(r"\bdialect\s*(==|!=|\bin\b|\bis\b)"),  # dialect == "postgresql"
    re.compile(r"\[[\w.]*\bdialect\]"),  # a table of per-engine values looked up by the dialect
    re.compile(r"\.postgres\b(?!_)"),  # store.postgres, self.postgres
    re.compile(r"\bself\._pg\b"),
    re.compile(r"isinstance\([^)]*\b(sqlite3\.Connection|psycopg\.Connection|\w*Database)\b"),
)
# deciding the engine from the --db value is the wiring's (afi/app, afi/commands): not a provider's or a door's
URL_BRANCH = re.compile(r"\bis_postgres_url\(")


def _allowed(path: Path) -> bool:
    """afi/storage, and a per-engine query module (``pg_*.py`` or ``sqlite_*.py``) anywhere."""
    relative = path.relative_to(ROOT)
    return relative.parts[:2] == ("afi", "storage") or path.name.startswith(("pg_", "sqlite_"))


def _branches() -> dict[str, int]:
    found: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if _allowed(path):
                continue
            relative = str(path.relative_to(ROOT))
            url_counts = relative.startswith(("providers/", "bindings/"))
            for line in path.read_text(encoding="utf-8").splitlines():
                code = line.split("#", 1)[0]
                if any(p.search(code) for p in BRANCHES) or (url_counts and URL_BRANCH.search(code)):
                    found[relative] = found.get(relative, 0) + 1
    return found


# Modules that still branch on the engine, with how many lines do: this list only shrinks (a module
# moved to ``database.engine`` leaves it; a new branch anywhere fails the test).
PENDING: dict[str, int] = {}


def test_no_engine_branch_outside_the_storage_seam() -> None:
    assert _branches() == PENDING


def test_the_grep_finds_a_branch_where_there_is_one(tmp_path: Path) -> None:
    """The patterns catch the ways code has asked for the engine (so the test above can fail)."""
    samples = [
        'if self._db.dialect == "postgresql":',
        "whole = database.dialect != 'sqlite'",
        "_SIZE[database.dialect]",
        "if self.store.postgres",
        "plus = '' if self._pg else '+'",
        "if isinstance(conn, sqlite3.Connection):",
        "if isinstance(db, PostgresDatabase):",
    ]
    assert [s for s in samples if not any(p.search(s) for p in BRANCHES)] == []
    assert URL_BRANCH.search("self.db = db if is_postgres_url(db) else Path(db)")
