"""The SSH shell through OpenSSH's own ``ssh``: its output equals GNU's for the same tree (materialised on disk)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from afi.bindings.ssh.fmt import parse_time
from afi.clients.ssh import SshClient
from afi.errors import InvalidPath, NotFound
from afi.model import Entry
from tests.support.ssh import SshServer, ssh_server

GNU_ENV = dict(os.environ, LC_ALL="C", TZ="UTC")

ALPHA = "first line\nthe canary sings\nthird line\nCANARY shouts\nlast canaryish line\n"
LONG = "x" * 400 + " canary " + "y" * 300 + "\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    base = tmp_path_factory.mktemp("ssh-shell")
    with ssh_server(base, "--conn-rate", "0", "--cmd-rate", "0") as running:
        with SshClient(port=running.port, identity=running.keys["writer"]) as client:
            client.mkdir("/files/docs")
            client.write("/files/docs/alpha.txt", ALPHA.encode())
            client.write("/files/docs/long.txt", LONG.encode())
            client.mkdir("/files/docs/sub")
            client.write("/files/docs/sub/gamma.md", b"# gamma\ncanary in sub\nword canary_not a word\n")
            client.write("/facts/sky.md", b"The sky is blue over the canary islands.")
            client.write("/procedures/brew.md", b"Grind, then pour water at 94 C.\nNo canary here.")
        yield running


def _walk(client: SshClient, path: str) -> Iterator[Entry]:
    try:
        entries = client.list(path).entries
    except InvalidPath:  # a folder the provider shows but cannot list yet: the shell reports it too
        return
    for entry in entries:
        yield entry
        if entry.type == "directory":
            yield from _walk(client, entry.path)


@pytest.fixture(scope="module")
def disk(server: SshServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tree, materialised as real files (through the afi subsystem), with the tree's mtimes."""
    top = tmp_path_factory.mktemp("tree") / "t"
    top.mkdir()
    with SshClient(port=server.port, identity=server.keys["writer"]) as client:
        entries = [client.stat("/.afi"), *_walk(client, "/")]
        for entry in entries:
            target = top / entry.path.lstrip("/")
            if entry.type == "directory":
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(client.read(entry.path).data)
        for entry in entries:
            moment = parse_time(entry.mtime).timestamp()
            os.utime(top / entry.path.lstrip("/"), (moment, moment))
    return top


def gnu(args: list[str], cwd: Path) -> str:
    """Run a GNU tool in the materialised tree (C locale, UTC), with '.'-relative paths made absolute."""
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=GNU_ENV)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


def absolute(text: str) -> list[str]:
    """GNU prints ./facts/x.md where the shell prints /facts/x.md: align, and sort (GNU walks unsorted)."""
    return sorted(
        line[1:] if line.startswith("./") else line if line.startswith("/") else "/" + line
        for line in text.splitlines()
    )


# A walk from / leaves /history out, as a file server keeps its snapshot folders out of a recursive
# walk (every version of every note is there: each hit would come twice); naming /history searches it.
WALK = "--exclude-dir=history"


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        pytest.param("grep -r canary /", ["grep", "-r", WALK, "canary", "."], id="r"),
        pytest.param("grep -rn canary /", ["grep", "-rn", WALK, "canary", "."], id="rn"),
        pytest.param("grep -rni canary /", ["grep", "-rni", WALK, "canary", "."], id="rni"),
        pytest.param("grep -rlw canary /", ["grep", "-rlw", WALK, "canary", "."], id="rlw"),
        pytest.param("grep -rc canary /files /facts", ["grep", "-rc", "canary", "files", "facts"], id="rc"),
        pytest.param("grep -rnE 'can[a-z]+y(ish)?' /", ["grep", "-rnE", WALK, "can[a-z]+y(ish)?", "."], id="E"),
        pytest.param("grep -rn 'c.nary' /", ["grep", "-rn", WALK, "c.nary", "."], id="bre"),
        pytest.param("grep -rnw -i canary /", ["grep", "-rnw", WALK, "-i", "canary", "."], id="wi"),
        pytest.param("grep -rn canary /history", ["grep", "-rn", "canary", "history"], id="history"),
    ],
)
def test_grep_over_the_tree_prints_what_gnu_grep_prints(
    server: SshServer, disk: Path, ours: str, theirs: list[str]
) -> None:
    run = server.ssh(ours)
    assert run.code == 0, run.err
    assert absolute(run.text) == absolute(gnu(theirs, disk))


def test_grep_with_several_paths_and_a_single_file(server: SshServer, disk: Path) -> None:
    several = server.ssh("grep -n canary /files/docs/alpha.txt /facts/sky.md")
    expected = gnu(["grep", "-n", "canary", "files/docs/alpha.txt", "facts/sky.md"], disk)
    assert several.text == expected.replace("files/", "/files/").replace("facts/", "/facts/")
    single = server.ssh("grep canary /files/docs/alpha.txt")
    assert single.text == gnu(["grep", "canary", "files/docs/alpha.txt"], disk)  # no file name for one file
    long = server.ssh("grep -n canary /files/docs/long.txt")
    assert long.text == "1:" + LONG, "a long line is printed whole, not cut like a search match"


def test_grep_exit_codes(server: SshServer) -> None:
    assert server.ssh("grep -r no-such-text-anywhere /").code == 1
    folder = server.ssh("grep canary /files")
    assert folder.code == 2 and folder.err.startswith("afi: /files: invalid_path: ")
    bad = server.ssh("grep -rE 'a(' /")
    assert bad.code == 2 and "invalid_path" in bad.err


@pytest.mark.parametrize(
    "args",
    [["head", "-n", "2"], ["head", "-c", "7"], ["tail", "-n", "2"], ["tail", "-c", "9"], ["wc"], ["wc", "-l"], ["cat"]],
    ids=lambda a: "".join(a),
)
def test_file_commands_print_what_gnu_prints(server: SshServer, disk: Path, args: list[str]) -> None:
    files = ["files/docs/alpha.txt", "files/docs/sub/gamma.md"]
    for operands in ([files[0]], files):
        run = server.ssh(" ".join([*args, *("/" + f for f in operands)]))
        assert run.code == 0, run.err
        expected = gnu([*args, *operands], disk)
        assert run.text == expected.replace("files/docs", "/files/docs").replace("//files", "/files")


def test_find_prints_what_gnu_find_prints(server: SshServer, disk: Path) -> None:
    for ours, theirs in [
        ("find /facts /files /history -name '*.md'", ["find", "facts", "files", "history", "-name", "*.md"]),
        ("find /files -type d", ["find", "files", "-type", "d"]),
        ("find /files -type f -name 'g*'", ["find", "files", "-type", "f", "-name", "g*"]),
    ]:
        run = server.ssh(ours)
        assert run.code == 0, run.err
        want = [line if line.startswith(".") else "/" + line for line in gnu(theirs, disk).splitlines()]
        assert sorted(run.text.splitlines()) == sorted(w[1:] if w.startswith("./") else w for w in want if w != ".")


def test_ls_la_has_gnu_columns(server: SshServer, disk: Path) -> None:
    run = server.ssh("ls -la /files/docs")
    theirs = gnu(["ls", "-la", "files/docs"], disk).splitlines()
    ours = run.text.splitlines()
    assert ours[0].startswith("total ") and theirs[0].startswith("total ")
    assert len(ours) == len(theirs)
    for mine, gnus in zip(ours[1:], theirs[1:], strict=True):
        m, g = mine.split(), gnus.split()
        assert len(m) == len(g) == 9
        assert m[0][0] == g[0][0], (mine, gnus)  # the type letter
        assert m[8] == g[8]  # the name
        assert m[5:8] == g[5:8] or m[8] in (".", ".."), (mine, gnus)  # the date columns
        if m[0][0] == "-":
            assert m[4] == g[4]  # the size
    plain = server.ssh("ls /files/docs")
    assert plain.text == gnu(["ls", "files/docs"], disk)


def test_pipes_redirections_and_sequences(server: SshServer) -> None:
    full = server.ssh("grep -rn canary /").text.splitlines()
    assert server.ssh("grep -rn canary / | head -n 3").text.splitlines() == full[:3]
    assert server.ssh("grep -rn canary / | wc -l").text == f"{len(full)}\n"
    assert server.ssh("cat /files/docs/alpha.txt | grep -n CANARY").text == "4:CANARY shouts\n"
    assert server.ssh("echo one; echo two").text == "one\ntwo\n"


def test_writes_through_the_shell(server: SshServer) -> None:
    assert server.ssh("mkdir -p /files/w/deep && true").code == 2  # '&&' is not offered: refused, nothing run
    run = server.ssh(
        "mkdir -p /files/w/deep; echo hello > /files/w/a.txt; echo more >> /files/w/a.txt; cat /files/w/a.txt"
    )
    assert (run.code, run.text) == (0, "hello\nmore\n")
    blob = bytes(range(256)) * 4
    assert server.ssh("cat > /files/w/blob.bin", stdin=blob).code == 0
    assert server.ssh("cp /files/w/a.txt /files/w/deep; mv /files/w/deep/a.txt /files/w/b.txt").code == 0
    with SshClient(port=server.port, identity=server.keys["reader"]) as reader:
        assert reader.read("/files/w/blob.bin").data == blob
        assert reader.read("/files/w/b.txt").data == b"hello\nmore\n"
    assert server.ssh("rm /files/w/a.txt; rm -r /files/w").code == 0
    gone = server.ssh("ls /files/w")
    assert gone.code == 2 and gone.err == "afi: /files/w: not_found: no such file or folder\n"


def test_a_read_only_key_cannot_write_and_nothing_is_half_written(server: SshServer) -> None:
    run = server.ssh("echo nope > /facts/ro-attempt.md", key="reader")
    assert run.code == 2
    assert run.err.startswith("afi: /facts/ro-attempt.md: forbidden: this operation needs the scope afi:write")
    for line in ("mkdir /files/ro", "rm /facts/sky.md", "mv /facts/sky.md /facts/sky2.md"):
        refused = server.ssh(line, key="reader")
        assert refused.code == 2 and ": forbidden: " in refused.err, line
    with SshClient(port=server.port, identity=server.keys["writer"]) as writer:
        with pytest.raises(NotFound):
            writer.stat("/facts/ro-attempt.md")
        assert writer.read("/facts/sky.md").data.endswith(b"canary islands.\n")
    history = server.ssh("echo x > /history/abc.md")
    assert history.code == 2 and ": forbidden: /history is read-only" in history.err


def test_errors_are_one_line_with_the_code_and_exit_2(server: SshServer) -> None:
    cases = {
        "cat /nope": "afi: /nope: not_found: ",
        "frobnicate /": "afi: unsupported: no such command 'frobnicate'",
        "cat /../x": "afi: /../x: invalid_path: ",
        "ls -Z /": "afi: invalid_path: ls: unknown option -Z",
        "echo 'open": "afi: invalid_path: unterminated single quote",
        "cat /files/docs": "afi: /files/docs: invalid_path: ",
    }
    for line, start in cases.items():
        run = server.ssh(line)
        assert run.code == 2, line
        assert run.err.startswith(start), (line, run.err)
        assert run.err.count("\n") == 1


def test_stat_tree_search_agents_and_help(server: SshServer) -> None:
    stat = server.ssh("stat /facts/sky.md").text
    assert stat.startswith("  File: /facts/sky.md\n  Size: ") and "regular file" in stat and "x-kind" in stat
    tree = server.ssh("tree /files").text
    assert tree.splitlines()[:3] == ["/files", "└── docs", "    ├── alpha.txt"]
    assert tree.endswith("\n2 directories, 3 files\n")
    found = server.ssh('search "what colour is the sky"').text.splitlines()
    score, path, _ = found[0].split("\t")
    assert path == "/facts/sky.md" and 0.0 < float(score) <= 1.0
    agents = server.ssh("agents").text
    assert f"ssh -p {server.port} 127.0.0.1" in agents and "grep -rn" in agents and "-s -p" in agents
    help_text = server.ssh("help").text
    for name in ("grep", "ls", "find", "search", "agents", "mkdir", "rm", "mv", "cp", "tree", "wc", "head", "tail"):
        assert f"  {name} " in help_text or f"  {name}\n" in help_text, name
    assert server.ssh("cat /.afi/manifest.json").text.startswith("{")


def test_a_bug_reports_its_type_but_no_host_detail(tmp_path: Path) -> None:
    from afi.bindings.ssh.shell import Shell
    from afi.clients import LocalClient
    from afi.provider import Caller
    from afi.providers.memory.provider import MemoryProvider

    real = LocalClient(MemoryProvider(tmp_path / "a.db", tmp_path / "files"), Caller("local"))

    class Exploding:
        def __getattr__(self, name: str) -> object:
            if name == "manifest":
                return real.manifest

            def fail(*args: object, **kwargs: object) -> object:
                raise FileNotFoundError(2, "No such file", "/srv/secret/host/path")

            return fail

    result = Shell(Exploding(), user="u", group="g").run_line("cat /facts/a.md")  # type: ignore[arg-type]
    text = result.stderr.decode() if isinstance(result.stderr, bytes) else str(result.stderr)
    assert "FileNotFoundError" in text and "/srv/secret" not in text
    assert result.status != 0


@pytest.mark.parametrize("size", [65_535, 65_537, 200_000, 3_000_000])
def test_standard_input_arrives_whole_whatever_its_size(server: SshServer, size: int) -> None:
    """``ssh host 'cat > file'`` stores every byte it was given (200,000 bytes were stored as 65,536, exit 0)."""
    blob = bytes((i * 7 + i // 251) % 256 for i in range(size))
    assert server.ssh(f"cat > /files/whole-{size}.bin", stdin=blob).code == 0
    stored = b""
    with SshClient(port=server.port, identity=server.keys["reader"]) as reader:
        while not (page := reader.read(f"/files/whole-{size}.bin", offset=len(stored))).eof:
            stored += page.data
        stored += page.data
    assert len(stored) == size and stored == blob
    piped = server.ssh("wc -c", stdin=blob)
    assert piped.text.split()[0] == str(size)
    assert server.ssh(f"rm /files/whole-{size}.bin").code == 0  # the module's other tests list /files


@pytest.mark.parametrize("pattern", ["[^as]*", "[!as]*", "alph[a]\\.txt", "*.[mt][dx]*", "[a-g]*", "?ky.md"])
def test_find_name_reads_a_glob_as_gnu_find_does(server: SshServer, disk: Path, pattern: str) -> None:
    """``[^x]`` negates as ``[!x]`` does and ``\\`` escapes (docs/afi.md, "Globs"), as GNU find reads them."""
    run = server.ssh(f"find /files /facts /procedures -name '{pattern}'")
    assert run.code == 0, run.err
    theirs = gnu(["find", "files", "facts", "procedures", "-name", pattern], disk)
    assert sorted(run.text.splitlines()) == sorted("/" + line for line in theirs.splitlines())
    assert run.text


def test_the_afi_subsystem_lists_with_the_same_globs(server: SshServer) -> None:
    with SshClient(port=server.port, identity=server.keys["reader"]) as client:
        names = [e.path for e in client.list("/files/docs", glob="[^a]*").entries]
        assert names == ["/files/docs/long.txt", "/files/docs/sub"]
        assert [e.path for e in client.list("/facts", glob="[^a]ky.md").entries] == ["/facts/sky.md"]
        with pytest.raises(InvalidPath, match="backwards"):
            client.list("/facts", glob="[z-a]*")
