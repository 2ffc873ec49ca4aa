"""Issue 29 through the FUSE door: what a shell writes is never silently dropped or hidden.

A shell's ``>`` does not look at what close(2) returns, and the mount only knows at close whether the
store takes a note. So a note the store refuses (broken front matter, a field of the wrong type, an
empty new note) stays at its path as written, marked (``user.afi.error``, ``/.afi/not-stored``), kept
on disk beside the store so a restart or a crash loses none of it, until it is rewritten or removed.
A name that is not UTF-8 is refused when it would be made (EILSEQ), and links are refused (EPERM).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pyfuse3
import pytest
import trio

from tests.support import warm
from tests.support.fuse import AFI, Mount, afi_mount, needs_fuse, unmount
from tests.support.hostile import Tally

pytestmark = needs_fuse

BROKEN = b"---\ntags: [unclosed\n---\nbody\n"


def sh(script: str, cwd: Path, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    """Run ``script`` in bash in ``cwd`` (``$1``… are ``args``); return what it did."""
    argv: list[str | bytes] = ["bash", "-c", script, "sh", *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, timeout=60)


def written(cwd: Path, path: str, data: bytes, *, append: bool = False) -> int:
    """Write ``data`` to ``path`` the README's way, a shell redirection of a builtin; return its exit status."""
    return sh(f'printf "%s" "$1" {">>" if append else ">"} "$2"', cwd, data, path).returncode


def stored(store: tuple[Path, Path], path: str) -> bytes | None:
    """What the store holds at ``path`` (``None``: nothing)."""
    from afi.errors import NotFound
    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(*store)
    try:
        return provider.read(provider.authenticate(None), path).data
    except NotFound:
        return None


def marker(path: Path) -> str | None:
    """The reason a held file shows in ``user.afi.error`` (``None``: not held)."""
    try:
        return os.getxattr(path, "user.afi.error").decode()
    except OSError as err:
        assert err.errno == errno.ENODATA
        return None


def held_soon(path: Path, seconds: float = 10.0) -> str | None:
    """The marker of ``path`` once it shows: an empty file is held when its last handle is released,
    which the kernel sends just after close returns."""
    deadline = time.monotonic() + seconds
    while (why := marker(path)) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return why


def not_stored(mount: Mount) -> dict[str, dict[str, object]]:
    """``/.afi/not-stored`` by path."""
    lines = (mount.path / ".afi" / "not-stored").read_bytes().decode().splitlines()
    return {row["path"]: row for row in map(json.loads, lines)}


def body(note: bytes | None) -> bytes:
    assert note is not None
    return note.split(b"\n---\n", 1)[1]


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "afi.db", tmp_path / "files"


@pytest.fixture
def mount(store: tuple[Path, Path], tmp_path: Path) -> Iterator[Mount]:
    with afi_mount(tmp_path / "m", *store) as mounted:
        yield mounted


def test_a_broken_note_written_with_a_redirection_stays_at_its_path_marked(
    mount: Mount, store: tuple[Path, Path]
) -> None:
    done = sh("printf -- '---\\ntags: [unclosed\\n---\\nbody\\n' > facts/broken.md; echo $?", mount.path)
    assert done.stdout == b"0\n"
    note = mount.path / "facts" / "broken.md"
    assert sh("cat facts/broken.md", mount.path).stdout == BROKEN
    assert b"broken.md" in sh("ls facts", mount.path).stdout.split()
    assert os.stat(note).st_size == len(BROKEN)
    why = marker(note)
    assert why is not None and why.startswith("not stored: the front matter is not valid YAML")
    entry = json.loads(os.getxattr(note, "user.afi.entry"))
    assert entry["attributes"]["x-not-stored"].startswith("the front matter is not valid YAML")
    listed = not_stored(mount)
    assert list(listed) == ["/facts/broken.md"] and listed["/facts/broken.md"]["size"] == len(BROKEN)
    assert mount.logged("/facts/broken.md: not stored: the front matter is not valid YAML")
    assert stored(store, "/facts/broken.md") is None
    # Rewritten into a note the store takes: stored, and the marker is gone.
    assert written(mount.path, "facts/broken.md", b"---\ntags: [closed]\n---\nbody\n") == 0
    assert body(stored(store, "/facts/broken.md")) == b"body\n"
    assert b"tags:\n- closed" in note.read_bytes() and marker(note) is None
    assert not_stored(mount) == {}


def test_rm_removes_a_held_note_and_leaves_nothing_behind(mount: Mount, store: tuple[Path, Path]) -> None:
    assert written(mount.path, "facts/gone.md", BROKEN) == 0
    kept = store[0].with_name("afi.db.not-stored") / "default" / "facts" / "gone.md"
    assert kept.read_bytes() == BROKEN  # on disk beside the store, byte for byte
    assert sh("rm facts/gone.md", mount.path).returncode == 0
    assert b"gone.md" not in sh("ls facts", mount.path).stdout.split()
    assert not (mount.path / "facts" / "gone.md").exists()
    assert stored(store, "/facts/gone.md") is None and not kept.exists() and not_stored(mount) == {}


def test_a_held_note_moves_with_mv_and_is_fixed_with_sed(mount: Mount, store: tuple[Path, Path]) -> None:
    assert written(mount.path, "facts/first.md", BROKEN) == 0
    assert sh("mv facts/first.md facts/second.md", mount.path).returncode == 0
    listed = sh("ls facts", mount.path).stdout.split()
    assert b"second.md" in listed and b"first.md" not in listed
    assert (mount.path / "facts" / "second.md").read_bytes() == BROKEN
    assert list(not_stored(mount)) == ["/facts/second.md"]
    kept = store[0].with_name("afi.db.not-stored") / "default" / "facts"
    assert sorted(p.name for p in kept.iterdir()) == ["second.md"]
    assert sh("sed -i 's/unclosed/closed]/' facts/second.md", mount.path).returncode == 0
    assert body(stored(store, "/facts/second.md")) == b"body\n"
    assert marker(mount.path / "facts" / "second.md") is None and not_stored(mount) == {}
    assert not kept.exists() or list(kept.iterdir()) == []


def test_a_broken_rewrite_of_a_note_shows_what_was_written_and_the_store_keeps_the_note(
    mount: Mount, store: tuple[Path, Path]
) -> None:
    assert written(mount.path, "facts/kept.md", b"the first version\n") == 0
    assert written(mount.path, "facts/kept.md", BROKEN) == 0
    assert sh("cat facts/kept.md", mount.path).stdout == BROKEN
    assert "not stored" in (marker(mount.path / "facts" / "kept.md") or "")
    assert body(stored(store, "/facts/kept.md")) == b"the first version\n"
    # An append that the store refuses (not UTF-8) is held whole: the note as it was, then the bytes added.
    assert written(mount.path, "facts/kept.md", b"fixed\n") == 0
    before = (mount.path / "facts" / "kept.md").read_bytes()
    assert written(mount.path, "facts/kept.md", b"\xff\xfe\n", append=True) == 0
    assert (mount.path / "facts" / "kept.md").read_bytes() == before + b"\xff\xfe\n"
    assert body(stored(store, "/facts/kept.md")) == b"fixed\n"
    # rm drops the held bytes only: the stored note shows again (a second rm forgets it).
    assert sh("rm facts/kept.md", mount.path).returncode == 0
    assert body((mount.path / "facts" / "kept.md").read_bytes()) == b"fixed\n"
    assert marker(mount.path / "facts" / "kept.md") is None


def test_touch_makes_an_empty_file_that_becomes_a_note_once_written(mount: Mount, store: tuple[Path, Path]) -> None:
    assert sh("touch facts/new.md", mount.path).returncode == 0
    assert b"new.md" in sh("ls facts", mount.path).stdout.split()
    assert (mount.path / "facts" / "new.md").read_bytes() == b""
    assert (held_soon(mount.path / "facts" / "new.md") or "").startswith("not stored: a note cannot be empty")
    assert written(mount.path, "facts/new.md", b"written after all\n", append=True) == 0
    assert body(stored(store, "/facts/new.md")) == b"written after all\n"
    assert marker(mount.path / "facts" / "new.md") is None and not_stored(mount) == {}


def test_a_held_note_survives_a_restart_and_a_crash(store: tuple[Path, Path], tmp_path: Path) -> None:
    with afi_mount(tmp_path / "m", *store) as mount:
        assert written(mount.path, "facts/restart.md", BROKEN) == 0
    with afi_mount(tmp_path / "m", *store) as mount:
        assert (mount.path / "facts" / "restart.md").read_bytes() == BROKEN
        assert (marker(mount.path / "facts" / "restart.md") or "").startswith("not stored: the front matter")
        assert written(mount.path, "facts/crash.md", b"---\nimportance: lots\n---\nbody\n") == 0
        mount.process.kill()  # the moment the shell is back: the bytes are on disk already
        mount.process.wait(10)
    with afi_mount(tmp_path / "m", *store) as mount:
        assert (mount.path / "facts" / "crash.md").read_bytes() == b"---\nimportance: lots\n---\nbody\n"
        assert "importance" in (marker(mount.path / "facts" / "crash.md") or "")
        assert sorted(not_stored(mount)) == ["/facts/crash.md", "/facts/restart.md"]


def test_bytes_kept_before_their_reason_was_written_still_show_held(store: tuple[Path, Path], tmp_path: Path) -> None:
    kept = store[0].with_name("afi.db.not-stored") / "default" / "procedures" / "half.md"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(BROKEN)  # a crash between the bytes and their reason
    with afi_mount(tmp_path / "m", *store) as mount:
        assert (mount.path / "procedures" / "half.md").read_bytes() == BROKEN
        assert (marker(mount.path / "procedures" / "half.md") or "").startswith("not stored: the store refused")
        assert sh("rm procedures/half.md", mount.path).returncode == 0
    assert not kept.exists()


def _deep(depth: int) -> bytes:
    return b"---\nx: " + b"[" * depth + b"]" * depth + b"\n---\nbody\n"


# (path, bytes): each the store refuses, each written with `>`
HOSTILE_NOTES: list[tuple[str, bytes]] = [
    ("facts/unclosed-list.md", BROKEN),
    ("facts/unclosed-map.md", b"---\ncontext: {a: 1\n---\nbody\n"),
    ("facts/unterminated.md", b"---\ntags: [a]\nbody with no closing line\n"),
    ("facts/only-opening.md", b"---\n"),
    ("facts/importance-word.md", b"---\nimportance: lots\n---\nbody\n"),
    ("facts/importance-big.md", b"---\nimportance: 7\n---\nbody\n"),
    ("facts/tags-number.md", b"---\ntags: 5\n---\nbody\n"),
    ("facts/tags-nested.md", b"---\ntags: [[a, b]]\n---\nbody\n"),
    ("facts/supersedes-path.md", b"---\nsupersedes: /facts/x.md\n---\nbody\n"),
    ("facts/valid-from-word.md", b"---\nvalid_from: someday\n---\nbody\n"),
    ("facts/unknown-field.md", b"---\ntitle: a title\n---\nbody\n"),
    ("facts/not-a-mapping.md", b"---\n- a\n- b\n---\nbody\n"),
    ("facts/tab-indent.md", b"---\ntags:\n\t- a\n---\nbody\n"),
    ("facts/deep-200.md", _deep(200)),
    ("facts/deep-2000.md", _deep(2000)),
    ("facts/deep-20000.md", _deep(20000)),
    ("facts/utf8-body.md", b"---\ntags: [a]\n---\nbody \xff\xfe\n"),
    ("facts/utf8-bare.md", b"caf\xe9 latin-1\n"),
    ("facts/utf8-surrogate.md", b"an encoded surrogate \xed\xa0\x80\n"),
    ("facts/empty.md", b""),
    ("facts/blank.md", b" \n\t\n"),
    ("facts/too-long.md", b"word " * 1000),
    ("procedures/unclosed.md", BROKEN),
    ("procedures/empty.md", b""),
    ("working/unclosed.md", BROKEN),
    ("working/empty.md", b""),
]


def _check_held(mount: Mount, cases: list[tuple[str, bytes]], tally: Tally) -> int:
    """Every case shows its bytes at its path, listed and marked; return the bytes that are not there."""
    lost = 0
    for name, _data in cases:
        held_soon(mount.path / name)
    held = not_stored(mount)
    for name, data in cases:
        path = mount.path / name
        try:
            shown = sh('cat "$1"', mount.path, name).stdout
        except OSError as err:
            shown = f"{err}".encode()
        if shown != data:
            lost += len(data)
            tally.fail(name, f"cat shows {len(shown)} bytes, not the {len(data)} written")
        if os.path.basename(name).encode() not in sh('ls "$1"', mount.path, os.path.dirname(name)).stdout.split():
            tally.fail(name, "not listed")
        if not (held_soon(path) or "").startswith("not stored: "):
            tally.fail(name, f"no user.afi.error: {marker(path)!r}")
        if "/" + name not in held:
            tally.fail(name, "not in /.afi/not-stored")
    return lost


def test_hostile_notes_written_with_a_redirection_lose_no_byte(store: tuple[Path, Path], tmp_path: Path) -> None:
    tally = Tally("FUSE notes the store refuses, written with >")
    with afi_mount(tmp_path / "m", *store) as mount:
        for name, data in HOSTILE_NOTES:
            tally.tried += 1
            status = written(mount.path, name, data)
            if status != 0:
                tally.fail(name, f"the shell's > exited {status}")
            if stored(store, "/" + name) is not None:
                tally.fail(name, "the store took it: not a refusal, fix the case")
        lost = _check_held(mount, HOSTILE_NOTES, tally)
    with afi_mount(tmp_path / "m", *store) as mount:  # and after a restart
        lost += _check_held(mount, HOSTILE_NOTES, tally)
        # Each is fixed by rewriting or goes with rm; then nothing is held, on disk either.
        for index, (name, _data) in enumerate(HOSTILE_NOTES):
            if index % 2:
                assert sh('rm "$1"', mount.path, name).returncode == 0
            else:
                assert written(mount.path, name, b"fixed\n") == 0
                assert body(stored(store, "/" + name)) == b"fixed\n", name
        assert not_stored(mount) == {}
    kept = store[0].with_name("afi.db.not-stored") / "default"
    assert [p for p in kept.rglob("*") if p.is_file()] == []
    total = sum(len(data) for _name, data in HOSTILE_NOTES)
    print(tally.report(), f"({total} bytes written, {lost} lost)")
    assert not tally.failures, tally.report()
    assert tally.tried == len(HOSTILE_NOTES) and lost == 0


BAD_NAMES = [b"bad\xfe.md", b"caf\xe9.md", b"\xed\xa0\x80.md", b"ok\xc3.md", b"\xff"]


def test_a_name_that_is_not_utf8_is_refused_where_it_would_be_made(mount: Mount, store: tuple[Path, Path]) -> None:
    root = os.fsencode(mount.path)
    (mount.path / "files" / "plain.txt").write_text("plain\n")
    tried = 0
    for name in BAD_NAMES:
        for area in (b"facts", b"files"):
            path = root + b"/" + area + b"/" + name
            done = sh('echo hi > "$1"; echo $?', mount.path, path)
            assert done.stdout == b"1\n" and b"Invalid or incomplete multibyte" in done.stderr, (path, done)
            attempts = [
                (os.mkdir, (path,)),
                (os.rename, (root + b"/files/plain.txt", path)),
                (os.symlink, (b"plain.txt", path)),
                (os.link, (root + b"/files/plain.txt", path)),
            ]
            for call, args in attempts:
                tried += 1
                with pytest.raises(OSError) as caught:
                    call(*args)  # type: ignore[operator]
                assert caught.value.errno == errno.EILSEQ, (call.__name__, path)
            assert name not in os.listdir(root + b"/" + area)
    assert tried == 4 * 2 * len(BAD_NAMES)
    assert (mount.path / "files" / "plain.txt").read_text() == "plain\n"


def test_symlinks_and_hard_links_are_refused_with_eperm(mount: Mount) -> None:
    files = mount.path / "files"
    (files / "target.txt").write_text("target\n")
    with pytest.raises(OSError) as caught:
        os.symlink("target.txt", files / "link")
    assert caught.value.errno == errno.EPERM
    with pytest.raises(OSError) as caught:
        os.link(files / "target.txt", files / "hard")
    assert caught.value.errno == errno.EPERM
    refused = sh("ln -s target.txt files/link", mount.path)
    assert refused.returncode == 1 and b"Operation not permitted" in refused.stderr
    assert sorted(os.listdir(files)) == ["target.txt"]


def test_a_detached_mount_logs_to_a_file_beside_the_store_and_says_where(
    store: tuple[Path, Path], tmp_path: Path
) -> None:
    mountpoint = tmp_path / "d"
    mountpoint.mkdir()
    db, root = store
    log = db.with_name("afi.db.mount.log")
    cmd = [*AFI, "mount", str(mountpoint), "--db", str(db), "--root", str(root)]
    try:
        done = warm.run(cmd, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and f"logs in {log};" in done.stdout
        assert written(mountpoint, "facts/broken.md", BROKEN) == 0
        deadline = time.monotonic() + 10  # said when the last handle is released, just after close returns
        while "/facts/broken.md: not stored" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        unmount(mountpoint)
    assert "/facts/broken.md: not stored: the front matter is not valid YAML" in log.read_text()


def test_a_late_release_of_an_empty_write_spoils_no_later_write(tmp_path: Path) -> None:
    """The kernel sends release after close returns: a `touch` whose release comes after the next writer's
    close must neither empty the bytes that writer left held nor hold an empty file over what it stored."""
    from afi.bindings.fuse import AfiFS, HeldFolder
    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    owner = provider.authenticate(None)
    fs = AfiFS(provider, owner, held=HeldFolder(tmp_path / "held", "default"))
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC

    async def touch_then(name: bytes, data: bytes) -> None:
        facts = await fs.lookup(1, b"facts")
        touched, _attrs = await fs.create(facts.st_ino, name, 0o644, flags, None)
        with pytest.raises(pyfuse3.FUSEError):
            await fs.flush(touched.fh)  # empty: refused (EINVAL), its release still to come
        again = await fs.lookup(facts.st_ino, name)
        writer = await fs.open(again.st_ino, flags, None)
        await fs.write(writer.fh, 0, data)
        with contextlib.suppress(pyfuse3.FUSEError):
            await fs.flush(writer.fh)
        await fs.release(writer.fh)
        await fs.release(touched.fh)  # late

    trio.run(touch_then, b"held.md", BROKEN)
    trio.run(touch_then, b"stored.md", b"a real note\n")
    assert fs.locals["/facts/held.md"].data == BROKEN
    assert (tmp_path / "held" / "default" / "facts" / "held.md").read_bytes() == BROKEN
    assert "/facts/stored.md" not in fs.locals
    assert body(provider.read(owner, "/facts/stored.md").data) == b"a real note\n"
