"""Raw HTTP/1.1 on a fresh socket: bytes out exactly as given, the answer back as status, headers, body.

For requests a client library would refuse to send (or would mend): the hostile corpora of the HTTP
door's tests and the server-CPU bench send them with :func:`exchange`.
"""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass

__all__ = ["Answer", "exchange"]


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: its status, headers (names lowercased) and body (de-chunked)."""

    status: int
    headers: dict[str, str]
    body: bytes


def exchange(address: tuple[str, int], raw: bytes, timeout: float = 60) -> Answer | None:
    """Send ``raw`` on a fresh connection; return the answer, or None when the server closed without one."""
    chunks: list[bytes] = []
    with socket.create_connection(address, timeout=timeout) as sock:
        with contextlib.suppress(OSError):  # the server may answer (and close) before it has read everything
            sock.sendall(raw)
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    data = b"".join(chunks)
    if not data:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = _unchunk(body)
    return Answer(int(status_line.split()[1]), headers, body)


def _unchunk(data: bytes) -> bytes:
    out = []
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out.append(data[:size])
        data = data[size + 2 :]
    return b"".join(out)
