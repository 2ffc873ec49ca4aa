"""MCP Inspector's CLI, the MCP project's own debugging client (run with ``npx``), against ``afi serve``.

Two ways a user meets it: with a pasted key (``--header "Authorization: Bearer …"``), and with nothing
but the server's URL, when the Inspector discovers the OAuth metadata, registers itself, prints the
authorization URL and waits on a loopback callback; here a real Chromium plays the owner, approves the
consent page with an admin key, and the Inspector's own listener receives the code. The Inspector is
pinned (the registry's ``latest`` moves); ``npx`` fetches it once from the npm registry into npm's cache.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import sync_playwright

from tests.bindings.http.test_oauth_flow import oauth_server
from tests.bindings.web.conftest import CHROMIUM
from tests.support import warm
from tests.support.servers import AfiServer

INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
HELLO = "hello from the memory\n"


# `make test` puts a Node.js recent enough for the Inspector (22.19 or later) in the virtualenv's bin/
PATH = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
NODE_RECENT = (
    "const [a, b] = process.versions.node.split('.').map(Number); process.exit(a > 22 || (a === 22 && b >= 19) ? 0 : 1)"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    if shutil.which("npx", path=PATH) is None:
        pytest.fail("no npx: `make setup` installs Node.js (apt-get install nodejs npm)")
    node = shutil.which("node", path=PATH)
    recent = node is not None and subprocess.run([node, "-e", NODE_RECENT], check=False, timeout=30).returncode == 0
    if not recent:
        pytest.fail("MCP Inspector 2.12 needs Node.js 22.19 or later: `make node` puts one in .venv/bin")
    with oauth_server(tmp_path_factory.mktemp("inspector"), HELLO.encode()) as running:
        yield running


def _environment(home: Path) -> dict[str, str]:
    """The Inspector's state in a home of its own; npm's cache where it already is; our Node.js first."""
    return {
        **os.environ,
        "PATH": PATH,
        "HOME": str(home),
        "NPM_CONFIG_CACHE": os.environ.get("NPM_CONFIG_CACHE", str(Path.home() / ".npm")),
        "NPM_CONFIG_UPDATE_NOTIFIER": "false",
        "MCP_INSPECTOR_SECRET_STORE": "memory",
    }


def _inspect(server: AfiServer, home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    cmd = [
        shutil.which("npx", path=PATH) or "npx",
        "-y",
        INSPECTOR,
        "--cli",
        server.url + "/mcp",
        "--format",
        "json",
        *args,
    ]
    return subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**_environment(home), **(env or {})},
    )  # fmt: skip


def _result(proc: subprocess.Popen[str], timeout: float = 180) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    assert lines, f"the Inspector printed no JSON (exit {proc.returncode}): {out[-2000:]} {err[-3000:]}"
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def _tool_text(answer: dict[str, Any]) -> str:
    assert "result" in answer, answer
    return "".join(part.get("text", "") for part in answer["result"]["content"])


def test_inspector_with_a_pasted_key(server: AfiServer, tmp_path: Path) -> None:
    key = ["--header", f"Authorization: Bearer {server.tokens['writer']}"]
    listed = _result(_inspect(server, tmp_path, *key, "--method", "tools/list"))
    names = {tool["name"] for tool in listed["result"]["tools"]}
    assert {"afi.read", "afi.write", "afi.search"} <= names

    call = ["--method", "tools/call", "--tool-name"]
    arguments = json.dumps({"path": "/files/inspected.txt", "data": "seen\n"})
    written = _result(_inspect(server, tmp_path, *key, *call, "afi.write", "--tool-args-json", arguments))
    assert not written["result"].get("isError"), written
    read = _result(_inspect(server, tmp_path, *key, *call, "afi.read", "--tool-arg", "path=/files/inspected.txt"))
    assert "seen" in _tool_text(read)

    # A key for another space is refused at the door: the Inspector reports it, nothing is read.
    other = ["--header", f"Authorization: Bearer {server.tokens['other-admin']}", "--stored-auth-only"]
    refused = _inspect(server, tmp_path, *other, *call, "afi.read", "--tool-arg", "path=/files/hello.txt")
    out, err = refused.communicate(timeout=180)
    assert refused.returncode != 0 and "hello from the memory" not in out, (out, err)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _await_authorization_url(proc: subprocess.Popen[str], timeout: float = 180) -> str:
    """The URL the Inspector asks the user to open (it prints it on stderr, then waits)."""
    lines: queue.Queue[str] = queue.Queue()
    stderr = proc.stderr
    assert stderr is not None

    def pump() -> None:
        for line in iter(stderr.readline, ""):
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"the Inspector never asked for a login: {''.join(seen)[-3000:]}")
        seen.append(line)
        if "/oauth/authorize?" in line:
            return line[line.index("http") :].strip()


def test_inspector_logs_in_with_oauth_knowing_only_the_url(server: AfiServer, tmp_path: Path) -> None:
    callback = f"http://127.0.0.1:{_free_port()}/oauth/callback"
    (tmp_path / "xdg-open").write_text("#!/bin/sh\nexit 0\n")  # the desktop's opener: the test is the browser
    (tmp_path / "xdg-open").chmod(0o755)
    # No TTY here: the Inspector goes interactive only when told it may (it then prints the URL).
    interactive = {"MCP_AUTO_OPEN_ENABLED": "true", "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    proc = _inspect(server, tmp_path, "--callback-url", callback, "--method", "tools/call",
                    "--tool-name", "afi.read", "--tool-arg", "path=/files/hello.txt", env=interactive)  # fmt: skip
    try:
        url = _await_authorization_url(proc)
        assert url.startswith(server.url + "/oauth/authorize?") and "code_challenge_method=S256" in url
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM)
            page = browser.new_page()
            page.goto(url)
            assert "afi:read" in page.content() and callback in page.content()  # the owner sees who and what
            page.fill("#key", server.tokens["admin"])
            with page.expect_navigation(url=callback + "*"):
                page.click("button[value=approve]")
            browser.close()
        answer = _result(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert HELLO.strip() in _tool_text(answer)
    # The grant is the owner's to see and revoke.
    listed = warm.run(
        [sys.executable, "-c", "from afi.cli import main; main()", "token", "clients", "--db", str(server.db)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "afi:read" in listed.stdout and "grant_" in listed.stdout, listed.stdout
