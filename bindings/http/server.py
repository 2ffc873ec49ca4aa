"""uvicorn with the limits a shared server needs: header and body read timeouts, and a connection cap.

uvicorn's one read timer, ``timeout_keep_alive``, is armed only after a response: a connection that
sends nothing, or half a request line, holds its descriptor for ever (500 of them took a server from
21 descriptors to 520, and past the descriptor limit ``accept`` fails with EMFILE for everyone).
``limit_concurrency`` does not help: it counts connections but answers 503 only once a request's
headers are complete, and never closes one. :class:`LimitedH11Protocol` is uvicorn's h11 protocol
with what is missing:

- **header timeout**: armed when a connection opens and when the first bytes of its next request
  arrive, disarmed when the request's headers are complete. A deadline for the whole header (as
  nginx's ``client_header_timeout``): trickling a byte at a time does not restart it. 408, then close.
- **body timeout**: restarted by every chunk of body (nginx's ``client_body_timeout``); not counted
  while uvicorn has paused reading because the app is behind, or while an ``Expect: 100-continue``
  waits for the app to ask for the body. Close when it fires (the app sees a disconnect).
- **connection cap**: a connection over it is answered 503 and closed at once, so the process keeps
  descriptors for its store and its files.
- protocol errors (a request h11 cannot parse) answered with the AFI error body, not plain text.

:class:`ServerConfig` is uvicorn's ``Config`` carrying :class:`Limits` (and pickled to each worker with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import socket
from dataclasses import dataclass, field
from typing import Any, Literal

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import STATUS_PHRASES, H11Protocol
from uvicorn.server import ServerState

from afi.errors import AfiError, InvalidPath, RateLimited

__all__ = ["DESCRIPTOR_RESERVE", "LimitedH11Protocol", "Limits", "ServerConfig", "default_max_connections"]

DESCRIPTOR_RESERVE = 256  # for the store's connections, the workspace's files, logs and the worker threads


def default_max_connections() -> int:
    """The connection cap that leaves :data:`DESCRIPTOR_RESERVE` of the process's descriptor limit free."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(16, soft - DESCRIPTOR_RESERVE)


@dataclass(frozen=True)
class Limits:
    """How long a client may take to send a request, and how many connections one process holds."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = field(default_factory=default_max_connections)


class ServerConfig(uvicorn.Config):
    """uvicorn's ``Config`` with :class:`Limits`, serving through :class:`LimitedH11Protocol`."""

    def __init__(self, app: Any, *, limits: Limits | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("http", LimitedH11Protocol)
        kwargs.setdefault("ws", "none")  # the app has no WebSocket route
        super().__init__(app, **kwargs)
        self.limits = limits or Limits()


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header and body read timeouts and a connection cap (see the module)."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = config.limits if isinstance(config, ServerConfig) else Limits()
        self._timer: asyncio.TimerHandle | None = None
        self._waiting_for: Literal["headers", "body"] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _no_delay(transport)
        if len(self.connections) > self.limits.max_connections:
            busy = RateLimited("the server holds as many connections as it may; try again shortly", retry_after=1)
            self._answer(503, busy)
            return
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        self._answer(400, InvalidPath("not an HTTP/1.1 request this server can parse (malformed or too large)"))

    # -- the timers ------------------------------------------------------------------------

    def _watch(self) -> None:
        """Arm the timer that fits where the request is (after every event that may have moved it)."""
        state = self.conn.their_state
        if self.transport.is_closing():
            self._disarm()
        elif state is h11.IDLE:
            if self._waiting_for != "headers":  # a new request: its whole header gets one deadline
                self._arm("headers", self.limits.header_timeout)
        elif state is h11.SEND_BODY:
            self._arm("body", self.limits.body_timeout)
        else:
            self._disarm()

    def _arm(self, waiting_for: Literal["headers", "body"], seconds: float) -> None:
        self._disarm()
        self._waiting_for = waiting_for
        self._timer = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._waiting_for = None, None

    def _expired(self) -> None:
        waiting_for = self._waiting_for
        self._timer, self._waiting_for = None, None
        if self.transport.is_closing():
            return
        if waiting_for == "body":
            if self.flow.read_paused or (self.cycle is not None and self.cycle.waiting_for_100_continue):
                self._arm("body", self.limits.body_timeout)  # the app is behind, not the client
                return
            self.transport.close()
            return
        late = InvalidPath(f"the request's headers did not arrive within {self.limits.header_timeout:g} s")
        self._answer(408, late)

    def _answer(self, status: int, err: AfiError) -> None:
        """Answer ``status`` with the AFI error body when h11 still may, then close the connection."""
        body = json.dumps({"error": err.to_dict()}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers.append((b"connection", b"close"))
        if err.retry_after is not None:
            headers.append((b"retry-after", str(max(1, round(err.retry_after))).encode()))
        try:
            response = h11.Response(status_code=status, headers=headers, reason=STATUS_PHRASES[status])
            events: list[h11.Event] = [response, h11.Data(data=body), h11.EndOfMessage()]
            self.transport.write(b"".join(self.conn.send(event) or b"" for event in events))
        except h11.LocalProtocolError:
            pass  # a response is already under way: closing is all that is left
        self.transport.close()


def _no_delay(transport: asyncio.Transport) -> None:
    """Send small responses at once. asyncio sets TCP_NODELAY only on sockets it made itself with
    IPPROTO_TCP; a listening socket made elsewhere (uvicorn's ``bind_socket`` for ``--workers``) has
    protocol 0, and each response then waited ~40 ms for the client's delayed ACK."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
