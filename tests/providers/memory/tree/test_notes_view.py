"""The notes view on both engines: listings in byte order with cursors and globs, the versions valid
now, grep's candidates (in any case), renderings by rowid, and the change counter.

Notes are written straight into the store's ``notes`` table, as the fabric writes them, so the view is
tested on its own. A listing's glob only narrows the rows in SQL (the tree's glob decides): every row the
glob matches must come back, on both engines.
"""

from __future__ import annotations

import random
import sqlite3
from typing import Any

import pytest

from afi.errors import InvalidPath
from afi.glob import Glob
from afi.providers.memory.fabric.rows import NAMED, file_name
from afi.providers.memory.fabric.types import Scope
from afi.providers.memory.tree.notes_view import NotesView
from afi.storage.database import Database, open_database

SCOPE = Scope(tenant_id="local", resource_id="default", thread_id="main")
ELSEWHERE = Scope(tenant_id="local", resource_id="other", thread_id="main")
PAST, FUTURE = "2000-01-01T00:00:00.000Z", "2999-01-01T00:00:00.000Z"
NAMES = ["a", "a-b", "b", "B", "é", "z_1", "zx1", "50%", "5000", "back\\slash", "star*", "[x]", "_lead", "-", "日本"]


class Notes:
    """Writes note rows into one store as the fabric does, one ``note_changes`` row each. A rendering
    ends with a newline, as every rendering does (one is added when the text has none); its content is
    the whole text: SQLite stores the rendering, PostgreSQL an empty front matter and adds the content."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.seq = 0

    def add(self, id_: str, rendered: str, *, name: str | None = None, kind: str = "fact", scope: Scope = SCOPE,
            valid_from: str | None = None, valid_to: str | None = None, status: str = "active") -> None:  # fmt: skip
        self.seq += 1
        where = (scope.tenant_id, scope.resource_id, scope.thread_id)
        text = rendered if rendered.endswith("\n") else rendered + "\n"
        column, stored = ("front", "") if self.database.dialect == "postgresql" else ("rendered", text)
        with self.database.transaction() as conn:
            conn.execute(
                "INSERT INTO notes (tenant_id, resource_id, thread_id, id, kind, name, content, ingested_at, "
                f"created_at, token_count, valid_from, valid_to, status, seq, {column}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*where, id_, kind, name, text, PAST, PAST, 1, valid_from, valid_to, status, self.seq, stored),
            )
            conn.execute(
                "INSERT INTO note_changes (tenant_id, resource_id, thread_id, note_id, op) VALUES (?, ?, ?, ?, ?)",
                (*where, id_, "add"),
            )


@pytest.fixture
def database(store_url: str) -> Database:
    return open_database(store_url)


@pytest.fixture
def notes(database: Database) -> Notes:
    return Notes(database)


@pytest.fixture
def view(database: Database) -> NotesView:
    return NotesView(database, SCOPE)


@pytest.fixture
def named(notes: Notes) -> Notes:
    """A fact for each of :data:`NAMES`, plus notes a listing of facts valid now leaves out."""
    for i, name in enumerate(NAMES):
        notes.add(f"{i:012x}", f"fact {name}", name=name)
    notes.add("e00000000001", "expired", name="expired", valid_to=PAST)
    notes.add("e00000000002", "not yet", name="later", valid_from=FUTURE)
    notes.add("e00000000003", "forgotten", name="forgotten", status="forgotten")
    notes.add("e00000000004", "a procedure", name="proc", kind="procedure")
    notes.add("e00000000005", "elsewhere", name="a", scope=ELSEWHERE)
    return notes


def _by_bytes(names: list[str]) -> list[str]:
    return sorted(names, key=lambda n: n.encode())


def _pages(list_page: Any, *, limit: int, glob: str | None = None) -> list[str]:
    """Every name a listing holds, read ``limit`` at a time with the last name as the cursor."""
    seen: list[str] = []
    after = None
    while True:
        rows = list_page(after=after, glob=glob, limit=limit)
        seen.extend(rows)
        if len(rows) < limit:
            return seen
        after = rows[-1]


def test_facts_valid_now_list_in_byte_order_page_by_page(view: NotesView, named: Notes) -> None:
    def page(**kw: Any) -> list[str]:
        return [f"{row.name}.md" for row in view.list_current("fact", **kw)]

    expected = _by_bytes([f"{name}.md" for name in NAMES])
    assert expected[:4] == ["-.md", "50%.md", "5000.md", "B.md"] and expected[-2:] == ["é.md", "日本.md"]
    for limit in (1, 2, 5, 100):
        assert _pages(page, limit=limit) == expected
    assert view.count_current("fact") == len(NAMES)
    assert [row.name for row in view.list_current("procedure", after=None, glob=None, limit=10)] == ["proc"]


@pytest.mark.parametrize(
    "glob",
    ["*", "a*", "?.md", "??.md", "[ab]*", "[^ab]*", "[!ab]*", "[a-c].md", "[]x[]*", "*_*", "*%*", "5?%.md", "*\\*",
     "star[*].md", "[[]x]*", "z_1.md", "[^]]*", "[-a]*", "[]-a]*", "[a-]*", "[a-c-e]*", "[ab", "*.MD", "日*",
     "[日-本]?.md", "back\\\\slash.md", "a*b*c*d*e*f*.md", "\U0010ffff*", "\ud7ff*"],
)  # fmt: skip
def test_a_glob_narrows_to_rows_it_may_match_never_fewer(view: NotesView, named: Notes, glob: str) -> None:
    """``%``, ``_`` and ``\\`` in names, sets, an unclosed one, more stars than the LIKE keeps, a prefix
    of the last character there is; read two rows a page: every name the glob matches comes back."""

    def page(**kw: Any) -> list[str]:
        return [f"{row.name}.md" for row in view.list_current("fact", **kw)]

    files = _by_bytes([f"{name}.md" for name in NAMES])
    pattern = Glob(glob)
    got = _pages(page, limit=2, glob=pattern)
    assert got == _by_bytes(got) and set(got) <= set(files)
    assert [f for f in files if pattern.matches(f)] == [f for f in got if pattern.matches(f)]


def test_history_lists_every_active_version_by_id(view: NotesView, named: Notes) -> None:
    def page(**kw: Any) -> list[str]:
        return [f"{row.id}.md" for row in view.list_history(**kw)]

    ids = [f"{i:012x}.md" for i in range(len(NAMES))] + [f"e0000000000{i}.md" for i in (1, 2, 4)]
    assert _pages(page, limit=4) == sorted(ids)
    assert _pages(page, limit=4, glob=Glob("e*")) == ["e00000000001.md", "e00000000002.md", "e00000000004.md"]
    narrowed = _pages(page, limit=4, glob=Glob("[^0]*[24].md"))
    assert [n for n in narrowed if n[0] != "0" and n[-4] in "24"] == ["e00000000002.md", "e00000000004.md"]


def test_the_version_valid_now_is_the_latest(view: NotesView, notes: Notes) -> None:
    notes.add("000000000001", "units v1", name="units")
    notes.add("000000000002", "units v2", name="units")
    notes.add("000000000003", "old", name="gone", valid_to=PAST)
    notes.add("000000000004", "elsewhere", name="units", scope=ELSEWHERE)
    found = view.current("fact", "units")
    assert found is not None and found[0].id == "000000000002" and found[1] == "units v2\n"
    assert found[0].size == len(b"units v2\n") and found[0].etag == '"n000000000002-2"'
    assert view.current("fact", "gone") is None
    wanted = [("fact", "units"), ("fact", "gone"), ("procedure", "units"), ("fact", "units")]
    assert view.current_ids(wanted) == {("fact", "units"): "000000000002"}
    assert view.current_ids([]) == {}
    old = view.version("000000000001")
    assert old is not None and old[1] == "units v1\n"
    assert view.version("000000000004") is None  # another scope's


def test_sizes_are_bytes_of_the_rendering(view: NotesView, notes: Notes) -> None:
    notes.add("000000000001", "日本語 é", name="wide")
    (row,) = view.list_current("fact", after=None, glob=None, limit=10)
    assert row.size == len("日本語 é\n".encode())


def test_grep_candidates_hold_every_literal_in_any_case(view: NotesView, notes: Notes) -> None:
    notes.add("000000000001", "Hello CAFÉ world", name="greeting")
    notes.add("000000000002", "hello cafe world", name="plain")
    notes.add("000000000003", "HELLO café, old", name="old", valid_to=PAST)
    notes.add("000000000004", "hello café", scope=ELSEWHERE)
    notes.add("000000000005", "hello café", status="forgotten")
    notes.add("000000000006", "100%_sure \\o/", name="odd")

    def ids(literals: list[str]) -> dict[str, bool]:
        return {id_: valid for _, id_, _, _, valid in view.grep_candidates(literals)}

    found = ids(["hello", "café"])
    assert found.items() >= {"000000000001": True, "000000000003": False}.items()
    assert set(found) <= {"000000000001", "000000000002", "000000000003"}  # "cafe" may be a candidate
    assert ids(["WORLD"]) == {"000000000001": True, "000000000002": True}
    assert ids(["0%_s", "\\o/"]) == {"000000000006": True}
    assert ids(["nowhere"]) == {}
    assert sorted(ids([])) == ["000000000001", "000000000002", "000000000003", "000000000006"]


def test_renderings_by_rowid_are_the_scope_s_own(view: NotesView, notes: Notes, database: Database) -> None:
    notes.add("000000000001", "mine", name="mine")
    notes.add("000000000002", "theirs", name="theirs", scope=ELSEWHERE)
    with database.read() as conn:
        rowids = {str(id_): int(rowid) for rowid, id_ in conn.execute("SELECT rowid, id FROM notes").fetchall()}
    assert view.rendered_by_rowid(list(rowids.values())) == {rowids["000000000001"]: "mine\n"}
    assert view.rendered_by_rowid([]) == {}


def test_a_lookup_by_name_reads_the_file_name_index(database: Database, notes: Notes) -> None:
    """Every lookup of a note by name says :data:`NAMED`, which the file-name index serves on both
    engines (PostgreSQL keeps no other index of names)."""
    for i in range(40):
        notes.add(f"{i:012x}", f"fact {i}", name=f"n{i}")
    sql = f"SELECT id FROM notes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? AND kind = ? AND {NAMED}"
    args = [SCOPE.tenant_id, SCOPE.resource_id, SCOPE.thread_id, "fact", file_name("n7")]
    with database.transaction() as conn:
        assert [row[0] for row in conn.execute(sql, args).fetchall()] == [f"{7:012x}"]
        if database.dialect == "postgresql":
            conn.execute("SET LOCAL enable_seqscan = off")
            plan = " ".join(str(row[0]) for row in conn.execute(f"EXPLAIN {sql}", args).fetchall())
        else:
            plan = " ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args).fetchall())
    assert "notes_file_name" in plan, plan


def test_the_names_of_a_page_of_hits_are_one_index_probe_each(database: Database, view: NotesView) -> None:
    """Search looks up which of its hits are current by name; on 5,000 notes the query reads the
    file-name index once per name and never walks the notes (on PostgreSQL a join planned on guessed
    statistics did: 44 ms at 100k notes instead of 0.6)."""
    column = "front" if database.dialect == "postgresql" else "rendered"
    rows = [
        ("local", "default", "main", f"{i:012x}", "fact", f"name-{i}", f"fact {i}\n", PAST, PAST, 1, "active", i, "")
        for i in range(5000)
    ]
    with database.transaction() as conn:
        conn.executemany(
            "INSERT INTO notes (tenant_id, resource_id, thread_id, id, kind, name, content, ingested_at, created_at, "
            f"token_count, status, seq, {column}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        conn.execute("ANALYZE notes")
    names = [("fact", f"name-{i * 997 % 5000}") for i in range(32)]
    sql, args = view.current_ids_query(names)
    with database.read() as conn:
        if database.dialect == "postgresql":
            plan = " ".join(str(row[0]) for row in conn.execute(f"EXPLAIN {sql}", args).fetchall())
            walks = "Seq Scan on notes" in plan
        else:
            details = [str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args).fetchall()]
            plan = " | ".join(details)
            walks = any(detail.startswith("SCAN n") for detail in details)
    assert "notes_file_name" in plan and not walks, plan
    assert view.current_ids(names) == {("fact", f"name-{i * 997 % 5000}"): f"{i * 997 % 5000:012x}" for i in range(32)}


def test_the_change_token_grows_with_each_write_of_the_scope(view: NotesView, notes: Notes) -> None:
    assert view.change_token() == 0
    notes.add("000000000001", "one")
    first = view.change_token()
    notes.add("000000000002", "elsewhere", scope=ELSEWHERE)
    assert view.change_token() == first
    notes.add("000000000003", "two")
    assert view.change_token() > first > 0


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_narrowing_never_drops_a_name_the_glob_matches(engine: str, request: pytest.FixtureRequest) -> None:
    """4,000 random globs (sets with ``!``, ``^``, ``]``, ranges, ``-`` at either end, unclosed ones,
    escapes, ``*``, ``?``, characters ``LIKE`` or ``GLOB`` reads as syntax), each against 8 names, half of them made
    from the glob so that many match: on each engine, of the 32,000 pairs those the glob matches are
    12,000 or more, and the pattern (SQLite's ``GLOB``, PostgreSQL's ``LIKE``) and range the store
    narrows by leave out 0 of them."""
    rng = random.Random(5)
    pairs: list[tuple[str, Glob]] = []
    while len(pairs) < 32_000:
        try:
            glob = Glob(_random_glob(rng))
        except InvalidPath:
            continue  # a range written backwards
        pairs.extend((_name_like(glob.text, rng) if i % 2 else _name(rng), glob) for i in range(8))
    matched = [(name, glob) for name, glob in pairs if glob.matches(name)]
    if engine == "sqlite":
        conn = sqlite3.connect(":memory:")
        sql = "SELECT ? GLOB ? AND ? >= ? AND (? IS NULL OR ? < ?)"
        kept = [conn.execute(sql, (n, g.sqlite_glob(), n, g.prefix, g.prefix_end, n, g.prefix_end)).fetchone()[0]
                for n, g in matched]  # fmt: skip
    else:
        with open_database(request.getfixturevalue("pg_store_url")).read() as conn:
            narrowed = 'n COLLATE "C" LIKE p ESCAPE \'\\\' AND n COLLATE "C" >= f AND (t IS NULL OR n COLLATE "C" < t)'
            rows = conn.execute(
                f"SELECT {narrowed} FROM unnest(?::text[], ?::text[], ?::text[], ?::text[]) "
                "WITH ORDINALITY AS x(n, p, f, t, i) ORDER BY i",
                ([n for n, _ in matched], [g.like() for _, g in matched], [g.prefix for _, g in matched],
                 [g.prefix_end for _, g in matched]),
            ).fetchall()  # fmt: skip
        kept = [row[0] for row in rows]
    dropped = [matched[i] for i, keep in enumerate(kept) if not keep]
    assert len(pairs) == 32_000 and len(matched) >= 12_000
    assert dropped == [], dropped[:10]


NAME_ALPHABET = "ab-]^%_\\.$é日"
CLASS_ALPHABET = "ab-]^!%_\\é日"
OTHER_ALPHABET = "ab-]^%_\\.$(|)+{é日"


def _random_glob(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 5)):
        roll = rng.random()
        if roll < 0.15:
            parts.append("*")
        elif roll < 0.25:
            parts.append("?")
        elif roll < 0.55:
            body = "".join(rng.choice(CLASS_ALPHABET) for _ in range(rng.randint(0, 5)))
            parts.append("[" + ("^" if rng.random() < 0.3 else "") + body + ("]" if rng.random() < 0.9 else ""))
        else:
            parts.append(rng.choice(OTHER_ALPHABET))
    return "".join(parts)


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(NAME_ALPHABET) for _ in range(rng.randint(0, 6)))


def _name_like(glob: str, rng: random.Random) -> str:
    """A name the glob may well match: ``*`` and ``?`` filled at random, a class by one of the
    characters written in it, the rest kept."""
    out, i = [], 0
    while i < len(glob):
        ch = glob[i]
        if ch == "*":
            out.append(_name(rng)[:2])
        elif ch == "?":
            out.append(rng.choice(NAME_ALPHABET))
        elif ch == "[":
            close = glob.find("]", i + 2)
            body = glob[i + 1 : close if close > 0 else len(glob)]
            out.append(rng.choice(body or NAME_ALPHABET))
            i = close if close > 0 else len(glob)
        else:
            out.append(ch)
        i += 1
    return "".join(out)
