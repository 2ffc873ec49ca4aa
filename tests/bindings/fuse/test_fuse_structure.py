"""The FUSE binding's parts talk through public interfaces: no module reaches into another object's
private attributes (``fs._attrs`` from a free function), each part owns its own state."""

from __future__ import annotations

import ast
from pathlib import Path

import afi.bindings.fuse

FUSE = Path(afi.bindings.fuse.__file__).parent


def _reaches(path: Path) -> list[str]:
    """Given a module, return each ``name._private`` it reads where ``name`` is not ``self`` or ``cls``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_reaches_into_another_objects_privates() -> None:
    modules = sorted(FUSE.glob("*.py"))
    assert len(modules) >= 10  # the binding's modules were found
    assert [reach for module in modules for reach in _reaches(module)] == []
