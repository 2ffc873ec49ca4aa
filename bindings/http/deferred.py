"""Doors of the HTTP app that load after the server listens: ``afi serve`` answers the manifest, the
HTTP/JSON API and the web page while the MCP SDK loads.

The MCP endpoint and the built-in authorization server are made of the MCP SDK, whose import alone
takes most of a second; built before listening, they held back every other door. A
:class:`DeferredDoors` puts a stand-in route on each of their paths (:mod:`.paths`) and, when the
app's lifespan starts, builds them in a worker thread and runs their own lifespan (the MCP session
managers) for as long as the app's. A request that arrives first waits for them (at most
``wait_seconds``); if they cannot be built, the server says why on stderr and each of their paths
answers 503 with the reason. ``wait=True`` builds them before the app starts serving instead (a
failure then stops the start, as any other).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from afi.errors import Internal

from .errors import error_response

__all__ = ["DEFAULT_WAIT_SECONDS", "DeferredDoors"]

DEFAULT_WAIT_SECONDS = 60.0


class DeferredDoors:
    """Routes on ``paths`` whose handlers ``build`` makes (in a worker thread) once the app starts.

    Args:
        build: returns a Starlette app holding the real routes (and, in its router's lifespan, what
            they need running); its routes are matched again against each request.
        paths: every path its routes serve (route syntax, as ``/spaces/{space}/mcp``).
        what: the doors, as the server names them in a refusal and on stderr.
        wait: build before the app serves (a failure stops its start) instead of after.
        wait_seconds: how long a request waits for the doors before a 503.
    """

    def __init__(
        self,
        build: Callable[[], Starlette],
        paths: Iterable[str],
        *,
        what: str,
        wait: bool = False,
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
    ) -> None:
        self.build = build
        self.paths = tuple(dict.fromkeys(paths))
        self.what = what
        self.wait = wait
        self.wait_seconds = wait_seconds
        self.inner: Starlette | None = None
        self.failure: str | None = None
        self._ready: anyio.Event | None = None

    def mount(self, app: Starlette) -> None:
        """Put the stand-in routes first on ``app`` and load the doors in its lifespan."""
        app.router.routes[0:0] = [Route(path, endpoint=self) for path in self.paths]
        inner_lifespan: Callable[[Any], AbstractAsyncContextManager[Any]] = app.router.lifespan_context

        @asynccontextmanager
        async def lifespan(target: Any) -> AsyncIterator[Any]:
            self._ready, self.inner, self.failure = anyio.Event(), None, None
            built = await anyio.to_thread.run_sync(self.build) if self.wait else None
            async with anyio.create_task_group() as group:
                if built is not None:
                    await group.start(self._load, built)
                else:
                    group.start_soon(self._load, None)
                async with inner_lifespan(target) as state:
                    yield state
                group.cancel_scope.cancel()

        app.router.lifespan_context = lifespan

    async def _load(
        self, built: Starlette | None, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Build the doors (unless ``built``), then run their lifespan until the app's ends."""
        assert self._ready is not None
        running = False
        try:
            inner = built if built is not None else await anyio.to_thread.run_sync(self.build)
            async with inner.router.lifespan_context(inner):
                self.inner, running = inner, True
                self._ready.set()
                task_status.started()
                await anyio.sleep_forever()
        except Exception as err:
            if self.wait or running:
                raise
            self.failure = f"{type(err).__name__}: {err}"
            print(f"afi: {self.what} could not start: {self.failure}", file=sys.stderr, flush=True)
            self._ready.set()
        finally:
            self.inner = None  # their lifespan has ended: a request now is refused, not handed to them

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.inner is None and self._ready is not None:
            with anyio.move_on_after(self.wait_seconds):
                await self._ready.wait()
        if self.inner is None:
            if self.failure is not None:
                refusal = Internal(f"{self.what} could not start: {self.failure}")
            else:
                refusal = Internal(f"{self.what} is still starting: try again shortly", retry_after=1.0)
            await error_response(refusal, status=503)(scope, receive, send)
            return
        await self.inner.router(scope, receive, send)
