"""Hostile bundles: traversal, symbolic and hard links, forged blobs, bombs, NUL, invalid UTF-8, sizes
past the store's caps, and records the store would never write itself. Each is refused with an AfiError
naming the file, before anything is written.

A clean bundle is exported once; each case copies it, breaks it one way (fixing the manifest's checksum
where the attack needs it to pass), and imports it into a store that already holds another space.
The figures: every case tried is refused (failures: zero; no traceback, no internal error), the
store's rows and workspace root are as before (changes on refusal: zero), nothing appears outside
the target, and a few go through the real CLI (exit 2, no traceback).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from afi.app.local import local_owner
from afi.clients import LocalClient
from afi.errors import AfiError
from afi.provider import Caller
from afi.providers.memory.bundle import export_bundle, import_bundle
from afi.providers.memory.provider import MemoryProvider
from tests.cli.test_bundle import _counts
from tests.support.cli import afi

OWNER = Caller(principal="local", space="default")
Attack = Callable[[Path, Path], str]  # (bundle, outside folder) -> what the error must say


def _manifest(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / "manifest.json").read_bytes())  # type: ignore[no-any-return]


def _save_manifest(bundle: Path, manifest: dict[str, Any]) -> None:
    (bundle / "manifest.json").write_text(json.dumps(manifest))


def _put(bundle: Path, rel: str, data: bytes, *, listed: bool = True) -> None:
    """Write a file of the bundle and (``listed``) make the manifest's checksum agree with it."""
    target = bundle / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()
    target.write_bytes(data)
    if listed:
        manifest = _manifest(bundle)
        manifest["checksums"][rel] = hashlib.sha256(data).hexdigest()
        _save_manifest(bundle, manifest)


def _rel(bundle: Path, prefix: str, suffix: str = "") -> str:
    return str(next(r for r in sorted(_manifest(bundle)["checksums"]) if r.startswith(prefix) and r.endswith(suffix)))


def _note(bundle: Path) -> str:
    """A fact's note file (not a workspace file's note)."""
    return str(next(r for r in sorted(_manifest(bundle)["checksums"]) if r.startswith("spaces/default/notes/")
                    and b"\nkind: fact\n" in (bundle / r).read_bytes()))  # fmt: skip


def _edit_note(bundle: Path, old: bytes, new: bytes) -> str:
    rel = _note(bundle)
    data = (bundle / rel).read_bytes()
    assert old in data, (old, data)
    _put(bundle, rel, data.replace(old, new, 1))
    return rel


def _edit_json(bundle: Path, rel: str, change: Callable[[object], object]) -> str:
    _put(bundle, rel, json.dumps(change(json.loads((bundle / rel).read_bytes()))).encode())
    return rel


def _edit_lines(bundle: Path, rel: str, change: Callable[[list[dict[str, object]]], None]) -> str:
    rows = [json.loads(line) for line in (bundle / rel).read_bytes().splitlines()]
    change(rows)
    _put(bundle, rel, b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    return rel


def _index_path(path: str) -> Callable[[object], object]:
    def change(index: object) -> object:
        assert isinstance(index, dict)
        index["files"][0]["path"] = path
        return index

    return change


def _symlink(bundle: Path, rel: str, target: Path) -> None:
    (bundle / rel).unlink()
    (bundle / rel).symlink_to(target)


def _symlinked_current(bundle: Path, outside: Path) -> str:
    rel = "spaces/default/files/current/notes/a.txt"
    (outside / "secret.txt").write_bytes((bundle / rel).read_bytes())  # the checksum still agrees
    _symlink(bundle, rel, outside / "secret.txt")
    return "symbolic link"


def _symlinked_blob(bundle: Path, outside: Path) -> str:
    rel = _rel(bundle, "blobs/")
    (outside / "blob").write_bytes((bundle / rel).read_bytes())
    _symlink(bundle, rel, outside / "blob")
    return "symbolic link"


def _symlinked_folder(bundle: Path, outside: Path) -> str:
    folder = bundle / "spaces/default/files/current/notes"
    shutil.copytree(folder, outside / "notes")
    shutil.rmtree(folder)
    folder.symlink_to(outside / "notes")
    return "symbolic link"


def _hardlink(rel_of: Callable[[Path], str]) -> Attack:
    """A file of the bundle made a hard link to a file outside it with the same bytes (its checksum agrees)."""

    def attack(bundle: Path, outside: Path) -> str:
        rel = rel_of(bundle)
        (outside / "secret").write_bytes((bundle / rel).read_bytes())
        (bundle / rel).unlink()
        os.link(outside / "secret", bundle / rel)
        return "hard links"

    return attack


def _sparse(rel_of: Callable[[Path], str]) -> Attack:
    """A file of the bundle grown to 1.1 GiB of holes (no disk used): over the 1 GiB file cap as it reads."""

    def attack(bundle: Path, outside: Path) -> str:
        with open(bundle / rel_of(bundle), "r+b") as f:
            f.truncate(int(1.1 * (1 << 30)))
        return "AFI_MAX_FILE_SIZE"

    return attack


def _manifest_format(value: object) -> Attack:
    def attack(bundle: Path, outside: Path) -> str:
        manifest = _manifest(bundle)
        manifest["format"] = value
        _save_manifest(bundle, manifest)
        return "format"

    return attack


def _self_superseding(bundle: Path, outside: Path) -> str:
    rel = _note(bundle)
    own = rel.rsplit("/", 1)[1].removesuffix(".md")
    data = re.sub(rb"\nsupersedes: [^\n]*", f"\nsupersedes: {own}".encode(), (bundle / rel).read_bytes(), count=1)
    _put(bundle, rel, data)
    return "supersede itself"


def _front(old: bytes, new: bytes, said: str) -> Attack:
    def attack(bundle: Path, outside: Path) -> str:
        _edit_note(bundle, old, new)
        return said

    return attack


def _huge_content(bundle: Path, outside: Path) -> str:
    rel = _note(bundle)
    head, _, _ = (bundle / rel).read_bytes().partition(b"\n---\n")
    _put(bundle, rel, head + b"\n---\n" + b"x" * 50_000_000 + b"\n")
    return "content has 50000000 characters"


def _forged_blob(bundle: Path, outside: Path) -> str:
    rel = _rel(bundle, "blobs/")
    _put(bundle, rel, b"bytes that are not the ones this blob is named by")
    return "not the SHA-256 of its bytes"


def _misnamed_blob(bundle: Path, outside: Path) -> str:
    _put(bundle, "blobs/not-a-sha256", b"x")
    return "blobs/not-a-sha256"


def _yaml_bomb(bundle: Path, outside: Path) -> str:
    """A billion laughs in a field that takes any mapping (9^9 strings once expanded)."""
    levels = ["&a0 [x, x, x, x, x, x, x, x, x]"]
    levels += [f"&a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, 10)]
    _edit_note(bundle, b"\nconsent: null", f"\nconsent: {{bomb: [{', '.join(levels)}]}}".encode())
    return "alias"


def _deep_yaml(bundle: Path, outside: Path) -> str:
    _edit_note(bundle, b"tags: []", b"tags: " + b"[" * 50_000 + b"]" * 50_000)
    return "front matter"


def _deep(rel_of: Callable[[Path], str]) -> Attack:
    def attack(bundle: Path, outside: Path) -> str:
        rel = rel_of(bundle)
        _put(bundle, rel, b"[" * 200_000 + b"]" * 200_000 + (b"\n" if rel.endswith(".jsonl") else b""))
        return "nested too deeply" if rel != "manifest.json" else "manifest.json"

    return attack


def _deep_manifest(bundle: Path, outside: Path) -> str:
    (bundle / "manifest.json").write_bytes(b"[" * 200_000 + b"]" * 200_000)
    return "nested too deeply"


def _session_id(sid: str) -> Attack:
    def attack(bundle: Path, outside: Path) -> str:
        from afi.providers.memory.bundle.layout import session_file

        rel = _rel(bundle, "spaces/default/ledger/", "s1.jsonl")
        lines = (bundle / rel).read_bytes().splitlines(keepends=True)
        lines[0] = json.dumps({"session": sid, "created_at": json.loads(lines[0])["created_at"]}).encode() + b"\n"
        new = f"spaces/default/ledger/{session_file(sid)}"
        manifest = _manifest(bundle)
        del manifest["checksums"][rel]
        _save_manifest(bundle, manifest)
        (bundle / rel).unlink()
        _put(bundle, new, b"".join(lines))
        return "session id"

    return attack


def _entry(change: Callable[[dict[str, object]], None], said: str) -> Attack:
    def attack(bundle: Path, outside: Path) -> str:
        _edit_lines(bundle, _rel(bundle, "spaces/default/ledger/", "s1.jsonl"), lambda rows: change(rows[1]))
        return said

    return attack


def _version(change: Callable[[dict[str, object]], None], said: str) -> Attack:
    def attack(bundle: Path, outside: Path) -> str:
        _edit_lines(bundle, "spaces/default/files/versions.jsonl", lambda rows: change(rows[0]))
        return said

    return attack


def _snapshot(change: Callable[[dict[str, str]], None], said: str) -> Attack:
    def attack(bundle: Path, outside: Path) -> str:
        def edit(rows: object) -> object:
            assert isinstance(rows, list)
            change(rows[0])
            return rows

        _edit_json(bundle, "spaces/default/snapshots.json", edit)
        return said

    return attack


def _lineage(bundle: Path, outside: Path) -> str:
    _edit_json(bundle, "spaces/default/lineage.json",
               lambda rows: [{"entry_id": "m1", "status": "revoked", "changed_at": "last tuesday"}])  # fmt: skip
    return "changed_at"


def _index_mtime(bundle: Path, outside: Path) -> str:
    def change(index: object) -> object:
        assert isinstance(index, dict)
        index["files"][0]["mtime_ns"] = 10**30
        return index

    _edit_json(bundle, "spaces/default/files/index.json", change)
    return "mtime_ns"


def _manifest_key(key: str) -> Attack:
    def attack(bundle: Path, outside: Path) -> str:
        (outside / "listed.txt").write_bytes(b"outside")
        manifest = _manifest(bundle)
        manifest["checksums"][key] = hashlib.sha256(b"outside").hexdigest()
        _save_manifest(bundle, manifest)
        return "missing from the bundle"

    return attack


def _space_name(bundle: Path, outside: Path) -> str:
    manifest = _manifest(bundle)
    manifest["spaces"]["../evil"] = manifest["spaces"]["default"]
    _save_manifest(bundle, manifest)
    return "invalid space"


ATTACKS: dict[str, Attack] = {
    "checksum key ../": _manifest_key("../outside/listed.txt"),
    "checksum key absolute": _manifest_key("/etc/hostname"),
    "index path ../": lambda b, o: (
        _edit_json(b, "spaces/default/files/index.json", _index_path("../../../x")),
        "not a workspace path",
    )[1],
    "index path absolute": lambda b, o: (
        _edit_json(b, "spaces/default/files/index.json", _index_path("/etc/x")),
        "not a workspace path",
    )[1],
    "version path ../": _version(lambda v: v.update(path="a/../../x"), "not a workspace path"),
    "version at not an instant": _version(lambda v: v.update(at="yesterday"), "versions.jsonl"),
    "version op unknown": _version(lambda v: v.update(op="explode"), "versions.jsonl"),
    "version size negative": _version(lambda v: v.update(size=-5), "versions.jsonl"),
    "note id ../": lambda b, o: (_edit_note(b, b"\nid: ", b"\nid: ../"), "holds note")[1],
    "note name with /": lambda b, o: (_edit_note(b, b"\nname: deploy", b"\nname: ../../deploy"), "name")[1],
    "note invalid UTF-8": lambda b, o: (_edit_note(b, b"\n---\n", b"\n---\n\xff\xfe"), "not UTF-8")[1],
    "note kind unknown": lambda b, o: (_edit_note(b, b"\nkind: fact", b"\nkind: ../../etc"), "kind")[1],
    "note created_at garbage": lambda b, o: (_edit_note(b, b"\ncreated_at: ", b"\ncreated_at: 'soon' #"), "created_at")[
        1
    ],
    "yaml alias bomb": _yaml_bomb,
    "yaml nested deep": _deep_yaml,
    "json nested deep (manifest)": _deep_manifest,
    "json nested deep (index)": _deep(lambda b: "spaces/default/files/index.json"),
    "json nested deep (space.json)": _deep(lambda b: "spaces/default/space.json"),
    "json nested deep (ledger line)": _deep(lambda b: _rel(b, "spaces/default/ledger/", "s1.jsonl")),
    "session id with /": _session_id("../../x"),
    "session id with NUL": _session_id("a\x00b"),
    "session id spaces": _session_id(" padded "),
    "entry type unknown": _entry(lambda e: e.update(type="bogus"), "type"),
    "entry timestamp garbage": _entry(lambda e: e.update(timestamp="whenever"), "timestamp"),
    "snapshot name ../": _snapshot(lambda s: s.update(name="../x"), "snapshot"),
    "snapshot at garbage": _snapshot(lambda s: s.update(at="never"), "snapshot"),
    "lineage time garbage": _lineage,
    "index mtime overflow": _index_mtime,
    "space name ../": _space_name,
    "symlinked current file": _symlinked_current,
    "symlinked blob": _symlinked_blob,
    "symlinked folder": _symlinked_folder,
    "forged blob bytes": _forged_blob,
    "misnamed blob": _misnamed_blob,
    "hard-linked current file": _hardlink(lambda b: "spaces/default/files/current/notes/a.txt"),
    "hard-linked blob": _hardlink(lambda b: _rel(b, "blobs/")),
    "hard-linked note": _hardlink(_note),
    "sparse current file of 1.1 GiB": _sparse(lambda b: "spaces/default/files/current/notes/a.txt"),
    "sparse blob of 1.1 GiB": _sparse(lambda b: _rel(b, "blobs/")),
    "note of 50,000,000 characters": _huge_content,
    "context of 7,000,000 characters": _front(b"\ncontext: null", b"\ncontext: " + b"c" * 7_000_000, "front matter"),
    "context over the note cap": _front(b"\ncontext: null", b"\ncontext: " + b"c" * 5000, "context has 5000"),
    "300 tags": _front(b"tags: []", b"tags: [" + b", ".join(b"t%d" % n for n in range(300)) + b"]", "tags has 300"),
    "a tag of 300 characters": _front(b"tags: []", b"tags: [" + b"t" * 300 + b"]", "tags has 300 characters"),
    "front matter nested 1,000 deep": _front(b"tags: []", b"tags: " + b"[" * 1000 + b"]" * 1000, "nest"),
    "importance NaN": _front(b"\nimportance: null", b"\nimportance: .nan", "importance"),
    "importance 1e309": _front(b"\nimportance: null", b"\nimportance: 1e309", "importance"),
    "importance 7": _front(b"\nimportance: null", b"\nimportance: 7", "importance"),
    "link weight NaN": _front(b"links: []", b"links: [{id: 0123456789ab, relation: related, weight: .nan}]", "weight"),
    "a note that supersedes itself": _self_superseding,
    "manifest format tar": _manifest_format("tar"),
    "manifest format missing": _manifest_format(None),
}


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("clean")
    provider = MemoryProvider(base / "afi.db", base / "files")
    client = LocalClient(provider, OWNER)
    client.write("/facts/deploy.md", b"We deploy on Mondays")
    client.write("/facts/deploy.md", b"We deploy on Fridays")
    provider.ledger_write(OWNER, "append", "s1", {"messages": [{"role": "user", "text": "hi", "entry_id": "m1"}]})
    client.write("/files/notes/a.txt", b"first bytes")
    client.write("/files/notes/a.txt", b"second bytes")
    provider.snapshot_create(OWNER, "before", at="2020-06-01T00:00:00Z")
    export_bundle(provider, base / "bundle", local_owner)
    return base / "bundle"


def _target(tmp_path: Path) -> MemoryProvider:
    provider = MemoryProvider(tmp_path / "target.db", tmp_path / "files")
    LocalClient(provider, Caller(principal="local", space="kept")).write("/facts/kept.md", b"the target had this")
    return provider


def _snapshot_of(tmp_path: Path) -> tuple[dict[str, int], list[str]]:
    files = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "files").rglob("*"))
    counts = _counts(str(tmp_path / "target.db"))
    counts.pop("audit")  # a refusal is audited
    return counts, files


def test_every_hostile_bundle_is_refused_naming_the_file_and_writes_nothing(clean: Path, tmp_path: Path) -> None:
    failures: list[str] = []
    for n, (name, attack) in enumerate(ATTACKS.items()):
        base = tmp_path / f"case{n}"
        base.mkdir()
        bundle, outside = base / "bundle", base / "outside"
        shutil.copytree(clean, bundle)
        outside.mkdir()
        said = attack(bundle, outside)
        provider = _target(base)
        before = _snapshot_of(base)
        outside_before = sorted(os.listdir(outside))
        started = time.monotonic()
        try:
            import_bundle(provider, bundle, local_owner)
        except AfiError as err:
            text = f"{err.path}: {err.code}: {err.message}"
            if said.lower() not in text.lower() or err.code not in ("invalid_path", "unsupported", "too_large"):
                failures.append(f"{name}: refused, but said {text!r} (expected {said!r})")
        except BaseException as err:
            failures.append(f"{name}: {type(err).__name__}: {str(err)[:200]}")
        else:
            failures.append(f"{name}: imported")
        if time.monotonic() - started > 20:
            failures.append(f"{name}: took {time.monotonic() - started:.0f} s")
        if _snapshot_of(base) != before:
            failures.append(f"{name}: the store or its root changed")
        if sorted(os.listdir(outside)) != outside_before:
            failures.append(f"{name}: something was written outside the target")
    figures = (f"{len(ATTACKS)} hostile bundles tried, {len(failures)} failures (refused with another error, "
               "a traceback, or a change to the store)")  # fmt: skip
    print(figures)
    assert failures == [], figures + ":\n" + "\n".join(failures)


@pytest.mark.parametrize("name", ["symlinked current file", "forged blob bytes", "json nested deep (manifest)",
                                  "yaml alias bomb", "session id with /", "hard-linked current file",
                                  "sparse current file of 1.1 GiB", "note of 50,000,000 characters",
                                  "manifest format tar", "importance 1e309"])  # fmt: skip
def test_the_cli_refuses_a_hostile_bundle_with_exit_2_and_no_traceback(name: str, clean: Path, tmp_path: Path) -> None:
    bundle, outside = tmp_path / "bundle", tmp_path / "outside"
    shutil.copytree(clean, bundle)
    outside.mkdir()
    said = ATTACKS[name](bundle, outside)
    _target(tmp_path)
    before = _snapshot_of(tmp_path)
    done = afi("import", str(bundle), db=tmp_path / "target.db")
    assert done.returncode == 2, done.stdout
    assert "Traceback" not in done.stderr and said.lower() in done.stderr.lower(), done.stderr
    assert _snapshot_of(tmp_path) == before


def test_a_space_option_that_is_no_space_name_is_refused(clean: Path, tmp_path: Path) -> None:
    _target(tmp_path)
    before = _snapshot_of(tmp_path)
    for space in ("../evil", "/abs", "a/b", ".."):
        done = afi("import", str(clean), "--space", space, db=tmp_path / "target.db")
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert _snapshot_of(tmp_path) == before and not (tmp_path / "evil").exists()


@pytest.mark.parametrize(("setting", "value"), [("AFI_MAX_FILE_SIZE", "8"), ("AFI_SPACE_QUOTA", "8")])
def test_a_bundle_past_the_targets_file_cap_or_quota_is_refused(setting: str, value: str, clean: Path,
                                                                tmp_path: Path) -> None:  # fmt: skip
    _target(tmp_path)
    before = _snapshot_of(tmp_path)
    done = afi("import", str(clean), db=tmp_path / "target.db", env={setting: value})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert ": too_large: " in done.stderr and setting in done.stderr, done.stderr
    assert _snapshot_of(tmp_path) == before


HOSTILE_COMMANDS = [
    ["space", "fork", "../evil", "dst"], ["space", "fork", "default", "../evil"], ["space", "fork", "default@", "dst"],
    ["space", "fork", "default@../../x", "dst"], ["space", "fork", "default@9999-12-31T23:59:59-01:00", "dst"],
    ["space", "fork", "default@" + "1" * 5000, "dst"], ["space", "fork", "default", "default"],
    ["space", "fork", "default@2999-01-01T00:00:00Z", "dst"], ["space", "fork", "nothing-here", "dst"],
    ["space", "restore", "default"], ["space", "restore", "default@"], ["space", "restore", "default@nope"],
    ["space", "restore", "../x@2020-01-01T00:00:00Z"], ["space", "restore", "default@2999-01-01T00:00:00Z"],
    ["space", "restore", "default@2026-12-01T10:00:00\x01Z"], ["gc", "--keep-days", "-1"],
    ["gc", "--keep-days", "99999999999"], ["gc", "--keep-days", "1", "--space", "../x"],
    ["export", "-o", "/proc/self"], ["export", "-o", "{tmp}/out", "--as-of", "yesterday"],
    ["export", "-o", "{tmp}/out", "--space", "../x"], ["export", "-o", "{tmp}/out", "--space", "nothing-here"],
    ["import", "{tmp}/missing"], ["import", "{tmp}/out2", "--format", "bundle"], ["import", "/dev/null"],
    ["import", "{tmp}", "--format", "mem0"], ["import", "/etc/hostname", "--format", "mcp-memory"],
]  # fmt: skip


@pytest.mark.slow
def test_hostile_command_lines_exit_2_without_a_traceback(clean: Path, tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    LocalClient(MemoryProvider(db, tmp_path / "files"), OWNER).write("/facts/a.md", b"a fact")
    (tmp_path / "out2").mkdir()
    failures = []
    for args in HOSTILE_COMMANDS:
        done = afi(*[a.replace("{tmp}", str(tmp_path)) for a in args], db=db)
        if done.returncode != 2 or "Traceback" in done.stderr or "afi: " not in done.stderr:
            failures.append(f"{args[:4]}: exit {done.returncode}: {done.stderr.strip()[-200:]}")
    assert failures == [], f"{len(HOSTILE_COMMANDS)} command lines, {len(failures)} failures:\n" + "\n".join(failures)
    assert not (tmp_path / "evil").exists() and not (tmp_path / "x").exists()
