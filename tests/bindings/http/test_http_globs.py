"""A list glob means the same in every folder, in every space and on both engines (docs/afi.md, "Globs").

A real ``afi serve`` over a SQLite file, then over PostgreSQL, holds the same names in ``/facts``,
``/procedures``, ``/files`` (and a folder in it), the ``other`` space and a past instant of each; every
glob of :data:`TABLE` is asked of every folder over HTTP, whole and two names a page, and of two
folders over MCP. The expected names are written out by hand from the documented rules, not
computed by the code under test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest

from tests.support.mcp import error_of, run, sdk
from tests.support.postgres import Databases
from tests.support.servers import start_afi_serve

# Note names (each listed as <stem>.md): characters the rules treat specially, and some LIKE and SQLite
# GLOB would (% _ \ [ ] ^ !), a capital, and characters of two and three bytes.
STEMS = ["a", "B", "b", "ab", "a^b", "^x", "!x", "a[b", "[x]", "x]", "x*y", "q?", "back\\slash", "50%", "z_1",
         "a-b", "é", "日本"]  # fmt: skip
ALL = set(STEMS)

# glob -> the stems whose <stem>.md it matches, by the rules of docs/afi.md
TABLE: dict[str, set[str]] = {
    "*": ALL,
    "*.md": ALL,
    "**.md": ALL,
    "": ALL,  # the same as no glob
    "*.MD": set(),  # case counts
    "a": set(),  # the whole name must match
    "?.md": {"a", "B", "b", "é"},  # ? is one character, however many bytes
    "??.md": {"ab", "^x", "!x", "x]", "q?", "日本"},
    "?本.md": {"日本"},
    "[ab].md": {"a", "b"},
    "[!ab].md": {"B", "é"},
    "[^ab].md": {"B", "é"},  # ^ negates as ! does
    "[a-c]*": {"a", "b", "ab", "a^b", "a[b", "back\\slash", "a-b"},
    "[!a-z]*": {"B", "^x", "!x", "[x]", "50%", "é", "日本"},
    "[!!]*": ALL - {"!x"},
    "a[b*": {"a[b"},  # a [ never closed is itself
    "a[b.md": {"a[b"},
    "[[]*": {"[x]"},
    "[]x]*": {"x]", "x*y"},  # ] first in a set is a member
    "[!]]*": ALL,  # no name starts with ]
    "*]*": {"[x]", "x]"},
    "[a-]*": {"a", "ab", "a^b", "a[b", "a-b"},  # - last is itself
    "a[!-]b.md": {"a^b", "a[b"},
    "a[\\^]b.md": {"a^b"},  # an escaped ^ is a member
    "a[\\^[]*": {"a^b", "a[b"},
    "\\[x\\].md": {"[x]"},
    "*\\**": {"x*y"},  # \* is a star
    "*[*]*": {"x*y"},
    "q\\?.md": {"q?"},
    "q?.md": {"q?"},
    "back\\\\slash.md": {"back\\slash"},  # \\ is one backslash
    "*%*": {"50%"},
    "*_*": {"z_1"},
    "a*b*": {"ab", "a^b", "a[b", "a-b"},
    "[é]*": {"é"},
    "[à-ÿ]*": {"é"},
}
# the globs of TABLE that also match the folder "sub", which /files holds beside the notes' names
SUB = {"*", "", "[!!]*", "[!]]*"}

# /working holds blocks, labelled [a-z0-9][a-z0-9._-]*: its own names and table
LABELS = ["a", "b", "ab", "a-b", "a.b", "a_b", "z9", "0x"]
WORKING: dict[str, set[str]] = {
    "*": set(LABELS),
    "": set(LABELS),
    "?.md": {"a", "b"},
    "[!a]*": {"b", "z9", "0x"},
    "[^a]*": {"b", "z9", "0x"},
    "a[._-]b.md": {"a-b", "a.b", "a_b"},
    "a\\-b.md": {"a-b"},
    "*_*": {"a_b"},
    "*[0-9]*": {"z9", "0x"},
    "*.MD": set(),
    "a[b*": set(),
}

REFUSED = {
    "[z-a]*": "backwards",
    "x/*": "'/'",
    "x" * 4097: "4,096",
    "[[:digit:]]*": "[0-9]",
    "a\x00": "NUL",
}


@dataclass
class Served:
    url: str
    at: str  # an instant after every write


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``afi serve`` over a new store of the engine, holding :data:`STEMS` in each folder listed."""
    base = tmp_path_factory.mktemp("globs")
    databases: Databases | None = None
    db: str = str(base / "afi.db")
    if request.param == "postgresql":
        databases = request.getfixturevalue("postgres_databases")
        db = databases.fresh()
    with start_afi_serve(db, base / "files") as server, httpx.Client(base_url=server.url, timeout=30) as http:
        for stem in STEMS:
            for space in ("", "/spaces/other"):
                for folder in ("/facts", "/procedures", "/files", "/files/sub"):
                    path = f"{folder}/{stem}.md"
                    http.put(f"{space}/afi/write", params={"path": path}, content=f"{stem} {folder}".encode())
        for label in LABELS:
            http.put("/afi/write", params={"path": f"/working/{label}.md"}, content=label.encode())
        for space in ("", "/spaces/other"):
            answer = http.get(f"{space}/afi/list", params={"path": "/facts"})
            assert answer.status_code == 200 and len(answer.json()["entries"]) == len(STEMS), answer.text
        time.sleep(0.01)
        at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        yield Served(server.url, at)
    if databases is not None:
        databases.drop(db)


def _folders(at: str) -> list[tuple[str, str]]:
    """(the route's space prefix, the folder) of every folder the table is asked of."""
    folders = ["/facts", "/procedures", "/files", "/files/sub"]
    folders += [f"/.afi/at/{at}/{area}" for area in ("facts", "procedures", "files")]
    return [(space, folder) for space in ("", "/spaces/other") for folder in folders]


def _names(http: httpx.Client, space: str, path: str, glob: str | None, limit: int) -> list[str]:
    """Every name a listing of ``path`` in ``space`` gives, following the cursor."""
    names: list[str] = []
    cursor = None
    for _page in range(100):
        params = {"path": path, "limit": str(limit), **({"glob": glob} if glob is not None else {})}
        answer = http.get(f"{space}/afi/list", params={**params, **({"cursor": cursor} if cursor else {})})
        assert answer.status_code == 200, (space, path, glob, answer.text)
        body = answer.json()
        names += [e["path"].rsplit("/", 1)[-1] for e in body["entries"]]
        cursor = body.get("next_cursor")
        if not cursor:
            return names
    raise AssertionError(f"{space}{path} {glob!r}: no end after 100 pages")


def test_every_glob_lists_the_documented_names_in_every_folder(served: Served) -> None:
    """36 globs x 14 folders (two spaces), whole and two names a page: 1,008 listings, failures 0."""
    failures = []
    tried = 0
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for space, folder in _folders(served.at):
            for glob, stems in TABLE.items():
                names = [f"{stem}.md" for stem in stems]
                if folder.endswith("/files") and glob in SUB:
                    names.append("sub")
                expected = sorted(names, key=lambda n: n.encode())
                for limit in (1000, 2):
                    tried += 1
                    got = _names(http, space, folder, glob, limit)
                    if got != expected:
                        failures.append((space, folder, glob, limit, got, expected))
    assert tried == 1008 and len(TABLE) == 36
    assert failures == [], failures[:5]


def test_working_blocks_list_what_the_rules_say(served: Served) -> None:
    """11 globs over the working blocks, whole and one name a page."""
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for glob, labels in WORKING.items():
            for limit in (1000, 1):
                expected = sorted(f"{x}.md" for x in labels)
                assert _names(http, "", "/working", glob, limit) == expected, (glob, limit)


def test_a_leading_dot_is_an_ordinary_character(served: Served) -> None:
    space = "/spaces/dots"
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for name in (".hidden", "x.md", "sub/y"):
            http.put(f"{space}/afi/write", params={"path": f"/files/{name}"}, content=b"x").raise_for_status()
        assert _names(http, space, "/files", "*", 1000) == [".hidden", "sub", "x.md"]
        assert _names(http, space, "/files", "[!.]*", 1) == ["sub", "x.md"]
        assert _names(http, space, "/files", ".*", 1) == [".hidden"]
        assert _names(http, space, "/files", "?hidden", 1000) == [".hidden"]


def test_history_lists_what_the_rules_say(served: Served) -> None:
    """``/history`` holds ``<id>.md`` (12 lowercase hex); globs over those names on both engines."""
    with httpx.Client(base_url=served.url, timeout=30) as http:
        ids = [n for n in _names(http, "", "/history", None, 1000) if n.endswith(".md")]
        assert len(ids) >= 4 * len(STEMS)  # a fact and a procedure per stem, each file's note, the blocks
        first = ids[0][:2]
        cases = {
            f"{first}*": [n for n in ids if n.startswith(first)],
            f"[{first[0]}]{first[1]}*.md": [n for n in ids if n.startswith(first)],
            "[!0-9]*": [n for n in ids if n[0] in "abcdef"],
            "[^0-9]*": [n for n in ids if n[0] in "abcdef"],
            "????????????????????.md": ids,  # an id is 20 hex digits
            "???????????????????.md": [],
            "*.MD": [],
            "[a-f0-9][a-f0-9]*": ids,
        }
        for glob, expected in cases.items():
            for limit in (1000, 3):
                got = [n for n in _names(http, "", "/history", glob, limit) if n != "files"]
                assert got == expected, (glob, limit)


def test_unusable_globs_are_refused_in_every_folder_saying_why(served: Served) -> None:
    """5 unusable globs x 17 folders: 85 listings, each a 400 invalid_path whose message says why."""
    failures = []
    tried = 0
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for space, folder in [*_folders(served.at), ("", "/history"), ("", "/working"), ("", "/")]:
            for glob, why in REFUSED.items():
                tried += 1
                answer = http.get(f"{space}/afi/list", params={"path": folder, "glob": glob})
                error = answer.json().get("error", {})
                if answer.status_code != 400 or error.get("code") != "invalid_path" or why not in error["message"]:
                    failures.append((space, folder, glob[:20], answer.status_code, error))
    assert tried == 85 and failures == [], failures[:5]


def test_mcp_afi_list_reads_the_table_the_same_way(served: Served) -> None:
    """The MCP door (the official SDK client, Streamable HTTP): every glob of the table over /facts and
    /files, and a refusal in words."""

    async def body() -> list[tuple[str, str, list[str]]]:
        wrong = []
        async with sdk(served.url + "/mcp", mode="legacy") as client:
            for folder in ("/facts", "/files/sub"):
                for glob, stems in TABLE.items():
                    result = await client.call_tool("afi.list", {"path": folder, "glob": glob})
                    assert not result.is_error and isinstance(result.structured_content, dict), result.content
                    got = [e["path"].rsplit("/", 1)[-1] for e in result.structured_content["entries"]]
                    if got != sorted((f"{stem}.md" for stem in stems), key=lambda n: n.encode()):
                        wrong.append((folder, glob, got))
            refused = error_of(await client.call_tool("afi.list", {"path": "/facts", "glob": "[^z-a]"}))
            assert refused["code"] == "invalid_path" and "backwards" in refused["message"], refused
        return wrong

    assert run(body) == []


def test_the_root_and_the_ledger_folders_list_by_the_same_rules(served: Served) -> None:
    """Folders the tree builds in memory (``/``, ``/.afi``, ``/sessions``) filter by the same glob."""
    areas = [".afi", "episodes", "facts", "files", "history", "procedures", "sessions", "working"]
    with httpx.Client(base_url=served.url, timeout=30) as http:
        assert _names(http, "", "/", None, 1000) == areas
        assert _names(http, "", "/", "[^.]*", 3) == areas[1:]
        assert _names(http, "", "/", "[!.e]*", 1000) == areas[2:]
        assert _names(http, "", "/", "\\.*", 1000) == [".afi"]
        assert _names(http, "", "/", "?????", 1) == ["facts", "files"]
        assert _names(http, "", "/", "*S", 1000) == []
        assert _names(http, "", "/.afi", "[^a]*", 1000) == ["manifest.json"]
        assert _names(http, "", "/sessions", "[^", 1000) == []
