"""``afi export`` / ``afi import``: a lossless bundle, through the real CLI, on both engines.

The store holds every kind of thing a bundle carries: a fact with several versions (superseded), an
expired note, links, tags, a multi-line context, a legal hold, a forgotten note (deleted, so not
exported), working blocks (one cleared), a ledger session with messages, an observation, a
reflection and a work scope, snapshots, text and binary workspace files with kept versions, and an
empty folder. Export, import into an empty store, export again: the same bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psycopg
import pytest

from afi.app.dbcopy import TABLES
from afi.clients import LocalClient
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support.cli import afi
from tests.support.postgres import Databases
from tests.support.servers import start_afi_serve

OWNER = Caller(principal="local", space="default")


def build_store(db: str | Path, root: Path) -> dict[str, str]:
    """A store with one of everything; returns ids the tests look for."""
    provider = MemoryProvider(db, root)
    client = LocalClient(provider, OWNER)
    client.write("/facts/deploy.md", b"We deploy with a zebra canary on Mondays")
    time.sleep(0.01)
    client.write("/facts/deploy.md", b"We deploy on Fridays now\n")  # a new version; the first is superseded
    client.write("/procedures/release.md", b"1. tag the build\n2. run the canary")
    tricky = provider.remember(
        OWNER, kind="fact", name="tricky", content="  leading spaces\n\ttab \n\n", tags=["a", "b: c", "ünï"],
        keywords=["2026-01-01", "null"], context="two\nlines  \n indented", importance=0.25,
        valid_from="2020-01-01T00:00:00Z", valid_to="2021-01-01T00:00:00Z", consent={"source": "user"},
    )  # fmt: skip
    provider.remember(OWNER, kind="fact", name="linked", content="see the tricky one",
                      links=[{"id": tricky.id, "relation": "related", "weight": 0.5}])  # fmt: skip
    held = provider.remember(OWNER, kind="fact", name="held", content="kept under legal hold")
    provider.forget(OWNER, id=held.id, hold=True)
    gone = provider.remember(OWNER, kind="fact", name="gone", content="forget me")
    provider.forget(OWNER, id=gone.id)
    provider.append_block(OWNER, "persona", "I am helpful")
    provider.append_block(OWNER, "persona", "and terse")
    provider.append_block(OWNER, "scratch", "tmp")
    provider.forget(OWNER, block="scratch")
    provider.ledger_write(OWNER, "append", "s1", {"messages": [
        {"role": "user", "text": "where are the canary dashboards?", "entry_id": "m1"},
        {"role": "assistant", "text": "in grafana under fleet", "entry_id": "m2"},
        {"role": "system", "text": "a system line", "entry_id": "m0"},
    ]})  # fmt: skip
    scope = provider.ledger_write(OWNER, "scope.open", "s1", {"name": "dashboards"})
    obs = provider.ledger_write(OWNER, "observe", "s1", {"text": "dashboards live in grafana",
                                                         "source_entry_ids": ["m2"]})  # fmt: skip
    provider.ledger_write(OWNER, "reflect", "s1", {"text": "grafana holds the dashboards",
                                                   "observation_ids": [obs["observation"]["id"]],
                                                   "scope_id": scope["scope"]["id"]})  # fmt: skip
    provider.ledger_write(
        OWNER, "append", "..odd: Ünï", {"messages": [{"role": "user", "text": "hi", "entry_id": "x"}]}
    )
    client.write("/files/notes/readme.txt", b"zebra crossing, first")
    client.write("/files/notes/readme.txt", b"zebra crossing, second")
    client.write("/files/data.bin", bytes(range(256)) * 3)
    client.mkdir("/files/empty")
    provider.snapshot_create(OWNER, "before", at="2020-06-01T00:00:00Z")
    LocalClient(provider, Caller(principal="local", space="other")).write("/facts/elsewhere.md", b"another space")
    return {"tricky": tricky.id, "held": held.id, "gone": gone.id}


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def cli(*args: str, store: str, root: Path, base: Path) -> tuple[int, str, str]:
    done = afi(*args, "--db", store, "--root", str(root), db=base / "unused.db")
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def other_store(request: pytest.FixtureRequest, store_url: str, tmp_path: Path) -> Iterator[str]:
    """A second empty store on the same engine as ``store_url``."""
    if not store_url.startswith("postgresql"):
        yield str(tmp_path / "other.db")
        return
    databases: Databases = request.getfixturevalue("postgres_databases")
    url = databases.fresh()
    yield url
    databases.drop(url)


def test_export_import_export_is_byte_identical(store_url: str, other_store: str, tmp_path: Path) -> None:
    ids = build_store(store_url, tmp_path / "files")
    assert cli("export", "-o", str(tmp_path / "one"), store=store_url, root=tmp_path / "files", base=tmp_path)[0] == 0
    one = tree(tmp_path / "one")
    assert f"spaces/default/notes/{ids['held']}.md" in one and f"spaces/default/notes/{ids['gone']}.md" not in one
    assert "legal_hold" in one[f"spaces/default/notes/{ids['held']}.md"].decode()
    assert {"spaces/default/working/persona.md", "spaces/default/working/scratch.md"} <= set(one)
    assert "spaces/other/notes" in "".join(one) and "spaces/default/files/current/data.bin" in one
    manifest = json.loads(one["manifest.json"])
    assert manifest["format"] == "afi-bundle" and manifest["version"] == 1
    assert manifest["embedder"]["name"].startswith("hash-") and "exported_at" not in manifest
    counts = manifest["spaces"]["default"]
    assert counts["notes"] == 7 and counts["observations"] == 1 and counts["reflections"] == 1
    assert counts["sessions"] == 2 and counts["files"] == 2 and counts["folders"] == 2
    assert counts["file_versions"] == 3 and counts["snapshots"] == 1 and counts["working_blocks"] == 2

    code, out, err = cli("import", str(tmp_path / "one"), store=other_store, root=tmp_path / "files2", base=tmp_path)
    assert code == 0, err
    assert "imported space default: 7 notes" in out and "re-embedding" in err
    assert (
        cli("export", "-o", str(tmp_path / "two"), store=other_store, root=tmp_path / "files2", base=tmp_path)[0] == 0
    )
    assert tree(tmp_path / "two") == one
    before, after = _reads(store_url, tmp_path / "files"), _reads(other_store, tmp_path / "files2")
    assert after == before


def _reads(store: str, root: Path) -> dict[str, object]:
    client = LocalClient(MemoryProvider(store, root), OWNER)
    out: dict[str, object] = {}
    for folder in ("/facts", "/procedures", "/history", "/working", "/sessions", "/files", "/files/notes"):
        entries = client.list(folder).entries
        out[folder] = [(e.path, e.size, e.type) for e in entries]
        out.update({e.path: client.read(e.path).data for e in entries if e.type == "file"})
    out["grep"] = [m.path for m in client.search("zebra", path="/files").matches]
    out["conversation"] = len(client.search({"conversation": "dashboards", "session": "s1"}, path="/sessions").matches)
    out["semantic"] = [m.path for m in client.search({"semantic": "deploy"}, path="/facts", limit=2).matches]
    return out


def test_sqlite_to_postgresql_is_byte_identical(tmp_path: Path, pg_store_url: str) -> None:
    sqlite_db = str(tmp_path / "afi.db")
    build_store(sqlite_db, tmp_path / "files")
    assert cli("export", "-o", str(tmp_path / "one"), store=sqlite_db, root=tmp_path / "files", base=tmp_path)[0] == 0
    code, _, err = cli("import", str(tmp_path / "one"), store=pg_store_url, root=tmp_path / "pg", base=tmp_path)
    assert code == 0, err
    assert cli("export", "-o", str(tmp_path / "two"), store=pg_store_url, root=tmp_path / "pg", base=tmp_path)[0] == 0
    assert tree(tmp_path / "two") == tree(tmp_path / "one")


def _counts(store: str) -> dict[str, int]:
    names = [t.name for t in TABLES] + ["ledger_fts"]
    if store.startswith("postgresql"):
        with psycopg.connect(store) as conn:
            return {n: int(conn.execute(f"SELECT count(*) FROM {n}").fetchone()[0]) for n in names}  # type: ignore[index]
    with sqlite3.connect(store) as conn:
        return {n: int(conn.execute(f"SELECT count(*) FROM {n}").fetchone()[0]) for n in names}


def _rewrite(bundle: Path, rel: str, data: bytes, *, fix_checksum: bool) -> None:
    (bundle / rel).write_bytes(data)
    if fix_checksum:
        import hashlib

        manifest = json.loads((bundle / "manifest.json").read_bytes())
        manifest["checksums"][rel] = hashlib.sha256(data).hexdigest()
        (bundle / "manifest.json").write_text(json.dumps(manifest))


def _corrupt(bundle: Path, how: str) -> str:
    """Break the bundle one way; return what the error must name."""
    manifest = json.loads((bundle / "manifest.json").read_bytes())
    note = next(rel for rel in manifest["checksums"] if rel.startswith("spaces/default/notes/"))
    session = next(rel for rel in manifest["checksums"] if rel.endswith("s1.jsonl"))
    if how == "missing-manifest":
        (bundle / "manifest.json").unlink()
        return "manifest.json is missing"
    if how == "checksum":
        (bundle / note).write_bytes((bundle / note).read_bytes() + b"tampered\n")
        return f"{note}: invalid_path: checksum mismatch"
    if how == "front-matter":
        _rewrite(bundle, note, (bundle / note).read_bytes().replace(b"kind:", b"kind: [", 1), fix_checksum=True)
        return f"{note}: invalid_path: broken front matter"
    if how == "front-matter-field":
        _rewrite(bundle, note, (bundle / note).read_bytes().replace(b"token_count:", b"token_count: many #", 1),
                 fix_checksum=True)  # fmt: skip
        return "broken front matter: field token_count"
    if how == "ledger-line":
        lines = (bundle / session).read_bytes().split(b"\n")
        lines[2] = b'{"pos": 1, "broken'
        _rewrite(bundle, session, b"\n".join(lines), fix_checksum=True)
        return f"{session}: invalid_path: line 3: not valid JSON"
    if how == "unknown-version":
        (bundle / "manifest.json").write_text(json.dumps({**manifest, "version": 99}))
        return "manifest.json: unsupported: this bundle is format version 99"
    if how == "extra-file":
        (bundle / "spaces/default/notes/0123456789ab.md").write_bytes(b"---\n---\nsmuggled\n")
        return "0123456789ab.md: invalid_path: this file is not in the manifest"
    raise AssertionError(how)


CORRUPTIONS = ["missing-manifest", "checksum", "front-matter", "front-matter-field", "ledger-line",
               "unknown-version", "extra-file"]  # fmt: skip


@pytest.fixture(scope="module")
def clean_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("bundle")
    build_store(base / "afi.db", base / "files")
    assert afi("export", "-o", str(base / "bundle"), db=base / "afi.db").returncode == 0
    return base / "bundle"


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_a_broken_bundle_is_refused_naming_the_file_and_writes_nothing(
    how: str, clean_bundle: Path, tmp_path: Path
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(clean_bundle, bundle)
    said = _corrupt(bundle, how)
    db = tmp_path / "target.db"
    LocalClient(MemoryProvider(db, tmp_path / "files"), Caller(principal="local", space="kept")).write(
        "/facts/kept.md", b"a note the target had before"
    )
    before, files_before = _counts(str(db)), sorted(os.listdir(tmp_path / "files"))
    done = afi("import", str(bundle), db=db)
    assert done.returncode == 2, done.stdout
    assert said in done.stderr.replace("\n", "") and "Traceback" not in done.stderr
    assert _counts(str(db)) == before and sorted(os.listdir(tmp_path / "files")) == files_before


def test_import_refuses_a_space_that_is_not_empty_and_takes_another_name(clean_bundle: Path, tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    LocalClient(MemoryProvider(db, tmp_path / "files"), OWNER).write("/facts/mine.md", b"already here")
    before = _counts(str(db))
    refused = afi("import", str(clean_bundle), db=db)
    assert refused.returncode == 2 and "conflict: the space 'default' is not empty" in refused.stderr
    assert _counts(str(db)) == before
    one = tmp_path / "one"
    shutil.copytree(clean_bundle, one)
    trimmed = afi("import", str(clean_bundle), "--space", "restored", db=db)  # of two spaces, pick one by name
    assert trimmed.returncode == 2 and "holds no space 'restored'" in trimmed.stderr
    other = afi("import", str(clean_bundle), "--space", "other", db=db)
    assert other.returncode == 0, other.stderr
    client = LocalClient(MemoryProvider(db, tmp_path / "files"), Caller(principal="local", space="other"))
    assert client.read("/facts/elsewhere.md").data.endswith(b"another space\n")


def test_export_as_of_an_instant_keeps_what_was_written_by_then(tmp_path: Path) -> None:
    db, root = tmp_path / "afi.db", tmp_path / "files"
    provider = MemoryProvider(db, root)
    client = LocalClient(provider, OWNER)
    client.write("/facts/deploy.md", b"Mondays")
    provider.ledger_write(OWNER, "append", "s1", {"messages": [{"role": "user", "text": "early", "entry_id": "m1"}]})
    time.sleep(0.05)
    moment = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    time.sleep(0.05)
    client.write("/facts/deploy.md", b"Fridays")
    provider.ledger_write(OWNER, "append", "s1", {"messages": [{"role": "user", "text": "late", "entry_id": "m2"}]})
    done = afi("export", "--as-of", moment, "-o", str(tmp_path / "past"), db=db)
    assert done.returncode == 0, done.stderr
    past = tree(tmp_path / "past")
    notes = [v.decode() for k, v in past.items() if k.startswith("spaces/default/notes/")]
    assert len(notes) == 1 and notes[0].endswith("---\nMondays\n")
    assert json.loads(past["manifest.json"])["as_of"] == moment
    ledger = past["spaces/default/ledger/s1.jsonl"].decode()
    assert '"early"' in ledger and '"late"' not in ledger
    again = afi("export", "-o", str(tmp_path / "past"), db=db)
    assert again.returncode == 2 and "conflict: the bundle's folder exists and is not empty" in again.stderr
    restored = afi("import", str(tmp_path / "past"), "--space", "monday", db=tmp_path / "elsewhere" / "afi.db")
    assert restored.returncode == 0, restored.stderr
    there = LocalClient(MemoryProvider(tmp_path / "elsewhere" / "afi.db", tmp_path / "elsewhere" / "files"),
                        Caller(principal="local", space="monday"))  # fmt: skip
    assert there.read("/facts/deploy.md").data.endswith(b"---\nMondays\n")
    bad = afi("export", "--as-of", "monday", "-o", str(tmp_path / "bad"), db=db)
    assert bad.returncode == 2 and "invalid_path" in bad.stderr and not (tmp_path / "bad").exists()


def test_an_imported_store_serves_its_notes_and_history_over_http(clean_bundle: Path, tmp_path: Path) -> None:
    db, root = tmp_path / "afi.db", tmp_path / "files"
    done = afi("import", str(clean_bundle), db=db)
    assert done.returncode == 0, done.stderr
    source = tree(clean_bundle)
    history = next(
        k for k, v in source.items() if k.startswith("spaces/default/notes/") and b"zebra canary" in v
    ).rsplit("/", 1)[1]
    with start_afi_serve(db, root) as server:
        fact = httpx.get(f"{server.url}/afi/read", params={"path": "/facts/deploy.md"})
        old = httpx.get(f"{server.url}/afi/read", params={"path": f"/history/{history}"})
        binary = httpx.get(f"{server.url}/afi/read", params={"path": "/files/data.bin"})
    assert fact.status_code == 200 and fact.content.endswith(b"---\nWe deploy on Fridays now\n")
    assert old.status_code == 200 and b"zebra canary on Mondays" in old.content and b"valid_to:" in old.content
    assert binary.content == bytes(range(256)) * 3


def test_import_sends_a_foreign_source_to_the_importers(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "deploy.md").write_text("We deploy on Tuesdays\n")
    done = afi("import", str(vault), "--space", "notes", db=tmp_path / "afi.db")
    assert done.returncode == 0, done.stderr
    client = LocalClient(
        MemoryProvider(tmp_path / "afi.db", tmp_path / "files"), Caller(principal="local", space="notes")
    )
    assert any(b"Tuesdays" in client.read(e.path).data for e in client.list("/facts").entries)
    refused = afi("import", str(vault), "--format", "bundle", db=tmp_path / "afi.db")
    assert refused.returncode == 2 and "manifest.json is missing" in refused.stderr
