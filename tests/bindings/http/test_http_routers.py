"""The HTTP and web routes are module-level routers: the app factory only assembles them, and each app
reaches its own provider through ``app.state`` (two apps in one process never see each other's store)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from afi.bindings.http.app import create_app
from afi.bindings.web import mount_web
from afi.providers.memory.provider import MemoryProvider
from tests.support.servers import serve_app_in_thread


@pytest.mark.parametrize("factory", [create_app, mount_web], ids=["create_app", "mount_web"])
def test_the_app_factories_define_no_routes_inside(factory: Callable[..., Any]) -> None:
    tree = ast.parse(textwrap.dedent(inspect.getsource(factory)))
    nested = [
        node.name
        for node in ast.walk(tree.body[0])
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node is not tree.body[0]
    ]
    assert nested == []


def test_two_apps_in_one_process_serve_their_own_store(tmp_path: Path) -> None:
    apps = []
    for name in ("a", "b"):
        provider = MemoryProvider(tmp_path / f"{name}.db", tmp_path / f"{name}-files")
        app = create_app(provider, max_body_bytes=1000 + len(apps))
        mount_web(app)
        apps.append(app)
    with serve_app_in_thread(apps[0]) as one, serve_app_in_thread(apps[1]) as two:
        written = httpx.put(f"{one}/afi/write", params={"path": "/files/only-a.txt"}, content=b"in a")
        assert written.status_code == 200, written.text
        assert httpx.get(f"{one}/afi/read", params={"path": "/files/only-a.txt"}).content == b"in a"
        missing = httpx.get(f"{two}/afi/read", params={"path": "/files/only-a.txt"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert "only-a.txt" in httpx.get(f"{one}/ui/browse", params={"path": "/files"}).text
        assert "only-a.txt" not in httpx.get(f"{two}/ui/browse", params={"path": "/files"}).text
        limits = [httpx.get(f"{url}/.afi/manifest.json").json()["x-limits"]["max_body_bytes"] for url in (one, two)]
        assert limits == [1000, 1001]
        space = httpx.get(f"{two}/spaces/default/afi/stat", params={"path": "/files/only-a.txt"})
        assert space.status_code == 404
        assert httpx.get(f"{one}/audit").json()["rows"]  # the admin router reads app a's audit log
        assert httpx.get(f"{two}/audit").json()["rows"] == []
