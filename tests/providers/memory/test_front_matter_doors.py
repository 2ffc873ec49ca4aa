"""A note's front matter at every door that parses it: nested any depth, too large, over a field's cap.

Each hostile head goes through HTTP ``/afi/write``, MCP ``afi.write`` and SSH ``cat >`` of one served
store, and through ``afi import`` of a Markdown folder; every one is a clear refusal (HTTP 400
``invalid_path`` for a depth, 413 ``too_large`` for a size), never a 500, and nothing is stored.
Figures: the cases tried at each door, failures listed (zero).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from afi.clients.mcp import McpClient
from afi.errors import AfiError
from tests.support.cli import afi
from tests.support.doors import Doors, served_doors
from tests.support.ssh import OPTS

DEPTHS = (200, 500, 1000, 5000, 20_000)


def _nested(depth: int, style: str) -> str:
    if style == "flow":
        return "context: " + "[" * depth + "]" * depth
    if style == "block":
        return "context:\n" + "- " * depth + "x"  # a sequence in a sequence …, one line
    return "context:\n" + "".join(f"{' ' * n}k{n}:\n" for n in range(min(depth, 600))) + " " * 600 + "x"


def _bomb() -> str:
    levels = [f"&b{n} [{', '.join([f'*b{n - 1}' if n else '*a'] * 9)}]" for n in range(8)]
    return "context: &a [x, x, x, x, x, x, x, x, x]\ntags: [" + ", ".join(levels) + "]"


# (case, front matter, the code, a word of the message, the word an import says or None: not its field)
CASES: list[tuple[str, str, str, str, str | None]] = [
    (f"{style} {depth} deep", _nested(depth, style), "invalid_path", "nest", "nest")
    for depth in DEPTHS
    for style in ("flow", "block")
]
CASES += [
    ("mapping 600 deep", _nested(600, "mapping"), "invalid_path", "nest", "nest"),
    ("context of 7,000,000 characters", "context: " + "x" * 7_000_000, "too_large", "front matter", "front matter"),
    ("context of 5,000 characters", "context: " + "x" * 5000, "too_large", "context", "context"),
    ("300 tags", "tags: [" + ", ".join(f"t{n}" for n in range(300)) + "]", "too_large", "tags", "tags"),
    ("a tag of 300 characters", "tags: [" + "t" * 300 + "]", "too_large", "tags", "tags"),
    # an import keeps the front matter's other fields in the note's context, as JSON
    ("5,000 links", "links: [" + ", ".join(["{id: 0123456789ab}"] * 5000) + "]", "too_large", "links", "context"),
    ("importance .nan", "importance: .nan", "invalid_path", "importance", None),
    ("importance 1e309", "importance: 1e309", "invalid_path", "importance", None),
    ("an alias bomb", _bomb(), "invalid_path", "alias", "alias"),
]
STATUS = {"invalid_path": 400, "too_large": 413}


def _note(front: str) -> bytes:
    return f"---\n{front}\n---\nthe body of a hostile note\n".encode()


@pytest.fixture(scope="module")
def doors(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Doors]:
    with served_doors(tmp_path_factory.mktemp("front-matter")) as served:
        yield served


def _stored(doors: Doors) -> list[str]:
    listed = httpx.get(f"{doors.http}/afi/list", params={"path": "/facts"}, headers=doors.auth)
    listed.raise_for_status()
    return [entry["path"] for entry in listed.json()["entries"]]


def test_http_write_refuses_every_hostile_front_matter_clearly(doors: Doors) -> None:
    failures = []
    for n, (case, front, code, word, _) in enumerate(CASES):
        sent = httpx.put(f"{doors.http}/afi/write", params={"path": f"/facts/http-{n}.md"}, headers=doors.auth,
                         content=_note(front), timeout=60)  # fmt: skip
        said = (
            sent.json().get("error", {}) if sent.headers.get("content-type", "").startswith("application/json") else {}
        )
        if sent.status_code != STATUS[code] or said.get("code") != code or word not in said.get("message", "").lower():
            failures.append(f"{case}: {sent.status_code} {sent.text[:200]}")
    assert failures == [], f"{len(CASES)} hostile front matters over HTTP, {len(failures)} failures:\n" + "\n".join(
        failures
    )
    assert _stored(doors) == []


def test_mcp_write_refuses_every_hostile_front_matter_clearly(doors: Doors) -> None:
    failures = []
    with McpClient.http(doors.http + "/mcp", doors.token) as client:
        for n, (case, front, code, word, _) in enumerate(CASES):
            try:
                client.write(f"/facts/mcp-{n}.md", _note(front))
            except AfiError as err:
                door_cap = code == "too_large" and "request body is at most" in err.message  # MCP's own, first
                if err.code != code or (word not in err.message.lower() and not door_cap):
                    failures.append(f"{case}: {err.code}: {err.message[:200]}")
            else:
                failures.append(f"{case}: written")
    assert failures == [], f"{len(CASES)} hostile front matters over MCP, {len(failures)} failures:\n" + "\n".join(
        failures
    )
    assert _stored(doors) == []


def test_ssh_write_refuses_every_hostile_front_matter_clearly(doors: Doors) -> None:
    cmd = ["ssh", "-p", str(doors.ssh_port), "-i", str(doors.ssh_key), *OPTS, "127.0.0.1"]
    failures = []
    cases = [(n, case, front, word) for n, (case, front, _, word, _) in enumerate(CASES) if len(_note(front)) < 60_000]
    for n, case, front, word in cases:  # `ssh host cat > FILE` takes 64 KiB of input today: larger heads stay out
        done = subprocess.run([*cmd, f"cat > /facts/ssh-{n}.md"], input=_note(front), capture_output=True,
                              timeout=60)  # fmt: skip
        said = done.stderr.decode("utf-8", "replace")
        if done.returncode == 0 or word not in said.lower() or "Traceback" in said or "internal" in said:
            failures.append(f"{case}: exit {done.returncode}: {said[-200:]}")
    assert failures == [], f"{len(cases)} hostile front matters over SSH, {len(failures)} failures:\n" + "\n".join(
        failures
    )
    assert _stored(doors) == []


@pytest.mark.slow
def test_import_of_a_markdown_folder_refuses_every_hostile_front_matter_naming_the_file(tmp_path: Path) -> None:
    failures = []
    cases = [(n, case, front, code, word) for n, (case, front, code, _, word) in enumerate(CASES) if word is not None]
    for n, case, front, code, word in cases:
        folder = tmp_path / f"case{n}"
        (folder / "notes").mkdir(parents=True)
        (folder / "notes" / "fine.md").write_text("A fine note.\n")
        (folder / "notes" / "hostile.md").write_bytes(_note(front))
        db = folder / "afi.db"
        done = afi("import", str(folder / "notes"), "--db", str(db), "--root", str(folder / "files"), db=db)
        if done.returncode != 2 or "Traceback" in done.stderr or "hostile.md" not in done.stderr:
            failures.append(f"{case}: exit {done.returncode}: {done.stderr.strip()[-200:]}")
        elif f": {code}: " not in done.stderr or word not in done.stderr.lower():
            failures.append(f"{case}: {done.stderr.strip()[-200:]}")
        elif afi("ls", "/facts", db=db).stdout.strip():
            failures.append(f"{case}: refused, but a note was stored")
    assert failures == [], f"{len(cases)} hostile front matters imported, {len(failures)} failures:\n" + "\n".join(
        failures
    )
