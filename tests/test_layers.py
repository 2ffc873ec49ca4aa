"""The layers hold: no import cycle inside a package, bindings never import providers, and every
``AFI_*`` setting is read in ``afi/config.py`` alone.

The graph is built from the source with :mod:`ast`, module-level imports only (an import inside a
function runs when it is called, so it cannot close a cycle at import time); ``if TYPE_CHECKING:``
blocks are skipped for the same reason.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# the installed package names of the three top folders (pyproject's package-dir)
TOPS = {"afi": "afi", "providers": "afi.providers", "bindings": "afi.bindings"}


def _modules() -> dict[str, Path]:
    """Every module of the three packages, by its dotted name (a package by its ``__init__``)."""
    found: dict[str, Path] = {}
    for folder, dotted in TOPS.items():
        for file in sorted((REPO / folder).rglob("*.py")):
            parts = file.relative_to(REPO / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((dotted, *parts))] = file
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _type_checking(node: ast.stmt) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run at import: the body, and the branches of its if/try blocks (not functions)."""
    for node in body:
        if isinstance(node, ast.If):
            if not _type_checking(node):
                yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _top_level(block)
        else:
            yield node


def _resolve(name: str) -> str | None:
    """Given a dotted name, return the deepest module of ours it names (``a.b.func`` → ``a.b``)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(name: str) -> set[str]:
    """Given a module, return the modules of ours it imports at module level."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    package = name if _is_package(name) else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _top_level(tree.body):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            source = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
            for alias in node.names:  # ``from . import views`` imports the submodule, not the package's names
                targets.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source)
    # importing a.b.c runs a/__init__ and a/b/__init__ first
    found = {resolved for target in targets if (resolved := _resolve(target)) is not None}
    return {module for module in found if module != name}


GRAPH = {name: _imports(name) for name in MODULES}


def _package(name: str) -> str:
    """The top package a module belongs to: the contract and wiring (``afi``), ``afi.providers`` or ``afi.bindings``."""
    return next((top for top in ("afi.providers", "afi.bindings") if name.startswith(top)), "afi")


def _cycles_within_packages() -> list[list[str]]:
    """Each cycle among the modules of one top package (an edge into another package is the layering's
    business, checked below)."""
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(GRAPH[node]):
            if _package(target) != _package(node):
                continue
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name)
    return cycles


def test_the_import_graph_sees_every_package() -> None:
    assert len(MODULES) > 200
    assert "afi.providers.memory.provider" in GRAPH["afi.app.local"]
    assert "afi.bindings.http.app" in GRAPH["afi.bindings.http"]


def test_no_import_cycle_inside_a_package() -> None:
    cycles = _cycles_within_packages()
    assert cycles == [], "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_bindings_never_import_providers() -> None:
    crossing = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if name.startswith("afi.bindings")
        for target in targets
        if target.startswith("afi.providers")
    )
    assert crossing == []


def test_providers_never_import_bindings_nor_the_wiring_room() -> None:
    crossing = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if name.startswith("afi.providers")
        for target in targets
        if target.startswith(("afi.bindings", "afi.app", "afi.commands", "afi.cli"))
    )
    assert crossing == []


def test_the_contract_imports_neither_providers_nor_bindings() -> None:
    contract = ("afi.errors", "afi.model", "afi.paths", "afi.provider", "afi.regex", "afi.config")
    crossing = sorted(
        f"{name} -> {target}"
        for name in contract
        for target in GRAPH[name]
        if target.startswith(("afi.providers", "afi.bindings", "afi.app", "afi.commands"))
    )
    assert crossing == []


def _is_environ(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _names_ours(call: ast.Call) -> bool:
    """Whether a ``setdefault``/``pop`` is of a setting of ours (one of a library's switches is a write)."""
    first = call.args[0] if call.args else None
    return not (isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("AFI_"))


def _environment_reads(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes that read the environment: ``os.environ[...]``, ``os.environ.get(...)``, ``os.getenv(...)``,
    however imported (a copy of the whole environment for a child process, ``{**os.environ}``, reads no
    setting)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            yield node
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and _is_environ(func.value):
                if func.attr == "get" or (func.attr in ("setdefault", "pop") and _names_ours(node)):
                    yield node
            elif (isinstance(func, ast.Attribute) and func.attr == "getenv") or (
                isinstance(func, ast.Name) and func.id == "getenv"
            ):
                yield node


def test_settings_are_read_in_config_alone() -> None:
    config = REPO / "afi" / "config.py"
    readers = sorted(
        f"{MODULES[name].relative_to(REPO)}:{node.lineno}"  # type: ignore[attr-defined]
        for name in MODULES
        if MODULES[name] != config
        for node in _environment_reads(ast.parse(MODULES[name].read_text(encoding="utf-8")))
    )
    assert readers == [], "read the setting in afi/config.py and pass it down"


@pytest.mark.parametrize(
    ("source", "reads"),
    [
        pytest.param("import os\nx = os.environ.get('AFI_X')", 1, id="environ-get"),
        pytest.param("import os\nx = os.getenv('AFI_X')", 1, id="getenv"),
        pytest.param("from os import environ\nx = environ['AFI_X']", 1, id="environ-subscript"),
        pytest.param("import os\nenv = {**os.environ, 'AFI_X': '1'}", 0, id="copy-for-a-child"),
        pytest.param("import os\nos.environ.setdefault('HF_HUB_OFFLINE', '1')", 0, id="library-switch"),
        pytest.param("import os\nos.environ['AFI_X'] = '1'", 0, id="a-write"),
    ],
)
def test_the_setting_reader_finder(source: str, reads: int) -> None:
    assert len(list(_environment_reads(ast.parse(source)))) == reads


def test_the_cycle_finder_finds_a_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    ring = {"afi.providers.a": {"afi.providers.b"}, "afi.providers.b": {"afi.providers.a"}, "afi.x": {"afi.y"}}
    monkeypatch.setattr(__import__(__name__, fromlist=["GRAPH"]), "GRAPH", {**ring, "afi.y": set()})
    assert _cycles_within_packages() == [["afi.providers.a", "afi.providers.b", "afi.providers.a"]]


def test_one_backend_serves_the_memory_tools_and_it_is_the_providers() -> None:
    """The five ``memory.*`` tools land in one place: a class with the ToolBackend's methods, in the provider."""
    verbs = {"view", "read", "append_file", "append_block", "recall", "forget"}
    backends = sorted(
        f"{name}.{node.name}"
        for name, file in MODULES.items()
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
        and not any(isinstance(base, ast.Name) and base.id == "Protocol" for base in node.bases)  # the interface
        and verbs <= {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
    )
    assert backends == ["afi.providers.memory.tools.ProviderToolBackend"]


def test_the_wiring_room_holds_no_append_loop_nor_fabric() -> None:
    """``afi/app/mcp.py`` adapts the provider's tool sessions to the binding: it makes no fabric and writes nothing."""
    source = (REPO / "afi" / "app" / "mcp.py").read_text(encoding="utf-8")
    assert "create_memory_fabric" not in source and ".write(" not in source and ".attach(" not in source
