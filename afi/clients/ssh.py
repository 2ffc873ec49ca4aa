"""An :class:`~afi.clients.AfiClient` over the SSH binding's ``afi`` subsystem, through OpenSSH's ``ssh -s``.

One ``ssh`` process holds one session; each verb is one JSON-RPC line out and one line back. A
refused login (no key, an unknown key) is :class:`~afi.errors.Unauthorized`; a JSON-RPC error that
carries an AfiError is that AfiError again.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from ..errors import AfiError, Internal, InvalidPath, Unauthorized, error_from_dict
from ..model import DeleteResult, Entry, Manifest, MatchPage, Page, ReadResult, SearchQuery, SearchRequest
from .base import search_body

__all__ = ["SshClient"]

_QUIET = ("-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=error")


class SshClient:
    """Given where an SSH binding listens and a private key, speak AFI over its ``afi`` subsystem.

    Args:
        host, port: the server (``afi ssh`` listens on 2222 by default).
        identity: the private key file; ``None`` offers no key at all (an anonymous caller).
        user: the login name (the binding ignores it; keys decide who you are).
        trust_host: skip host-key checking (tests and loopback); otherwise OpenSSH's known_hosts apply.
        timeout: seconds to wait for one answer.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 2222,
        *,
        identity: Path | str | None = None,
        user: str = "afi",
        trust_host: bool = True,
        timeout: float = 60.0,
        ssh_binary: str = "ssh",
    ) -> None:
        cmd = [ssh_binary, "-p", str(port), "-o", "BatchMode=yes", "-F", "/dev/null", "-o", "IdentityAgent=none"]
        if identity is not None:
            cmd += ["-o", "IdentitiesOnly=yes", "-i", str(identity)]
        else:
            cmd += ["-o", "PubkeyAuthentication=no", "-o", "PasswordAuthentication=no"]
        if trust_host:
            cmd += list(_QUIET)
        cmd += ["-s", f"{user}@{host}", "afi"]
        self.timeout = timeout
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._stderr: list[bytes] = []
        self._pump = threading.Thread(target=self._pump_stderr, daemon=True)
        self._pump.start()

    def _pump_stderr(self) -> None:
        assert self._proc.stderr is not None
        for line in iter(self._proc.stderr.readline, b""):
            self._stderr.append(line)
        self._proc.stderr.close()

    def close(self) -> None:
        """End the session (closing stdin ends the subsystem) and reap the ``ssh`` process."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10)
        self._pump.join(10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def __enter__(self) -> SshClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Given a method and its params, send one request; return its result or raise its AfiError."""
        request = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}}
        with self._lock:
            stdin, stdout = self._proc.stdin, self._proc.stdout
            assert stdin is not None and stdout is not None
            try:
                stdin.write((json.dumps(request) + "\n").encode())
                stdin.flush()
                line = stdout.readline()
            except (BrokenPipeError, ValueError):
                line = b""
        if not line:
            raise self._gone()
        response = json.loads(line)
        error = response.get("error")
        if error is None:
            return response.get("result")
        if isinstance(error.get("data"), dict):
            raise error_from_dict(error["data"])
        if error.get("code") in (-32602, -32600):
            raise InvalidPath(f"bad request: {error.get('message')}")
        raise Internal(f"JSON-RPC error {error.get('code')}: {error.get('message')}")

    def _gone(self) -> AfiError:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(10)
        text = b"".join(self._stderr).decode("utf-8", "replace").strip()
        if "Permission denied" in text:
            return Unauthorized(f"the SSH server refused the login: {text.splitlines()[-1]}")
        if "afi: " in text:
            first = next(line for line in text.splitlines() if "afi: " in line)
            return Internal(f"the SSH session ended: {first}")
        return Internal(f"the SSH session ended (exit {self._proc.returncode}): {text[-300:] or 'no message'}")

    # -- the verbs -------------------------------------------------------------------------------

    def manifest(self) -> Manifest:
        return Manifest.model_validate(self.call("manifest"))

    def stat(self, path: str) -> Entry:
        return Entry.model_validate(self.call("stat", {"path": path}))

    def list(self, path: str, *, limit: int = 1000, cursor: str | None = None, glob: str | None = None) -> Page:
        params: dict[str, Any] = {"path": path, "limit": limit, "cursor": cursor, "glob": glob}
        return Page.model_validate(self.call("list", params))

    def read(self, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult:
        body = dict(self.call("read", {"path": path, "offset": offset, "length": length}))
        body["data"] = base64.b64decode(body.pop("data", ""))
        body.pop("encoding", None)
        return ReadResult.model_validate(body)

    def search(self, request_or_query: SearchRequest | SearchQuery | dict[str, Any], **kw: Any) -> MatchPage:
        return MatchPage.model_validate(self.call("search", search_body(request_or_query, **kw)))

    def write(
        self,
        path: str,
        data: bytes,
        *,
        offset: int | None = None,
        append: bool = False,
        create_only: bool = False,
        if_match: str | None = None,
    ) -> Entry:
        params: dict[str, Any] = {
            "path": path,
            "data": base64.b64encode(data).decode("ascii"),
            "offset": offset,
            "append": append,
            "create_only": create_only,
            "if_match": if_match,
        }
        return Entry.model_validate(self.call("write", params))

    def mkdir(self, path: str, *, parents: bool = False) -> Entry:
        return Entry.model_validate(self.call("mkdir", {"path": path, "parents": parents}))

    def delete(self, path: str, *, recursive: bool = False) -> DeleteResult:
        return DeleteResult.model_validate(self.call("delete", {"path": path, "recursive": recursive}))

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> Entry:
        return Entry.model_validate(self.call("move", {"from": source, "to": destination, "overwrite": overwrite}))
