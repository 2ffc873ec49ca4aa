"""What every HTTP route depends on: who asks (:data:`Who`) and what serves them (:data:`Served`).

:func:`~.app.create_app` leaves a :class:`~afi.auth.door.Door` at ``app.state.afi`` (the provider, the
rate limit and the spaces served); the routers of this package are module-level and reach it here
through FastAPI dependencies, so they import nothing of the app that mounts them.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from afi.auth.door import Door
from afi.provider import Caller, Provider

from ..offload import offload

__all__ = ["PathQ", "Served", "Who", "caller_of", "door_of"]


def door_of(request: Request) -> Door:
    """Given a request, return the door of the app serving it (set by :func:`~.app.create_app`)."""
    door: Door = request.app.state.afi
    return door


def caller_of(request: Request) -> Caller:
    """Given a request, return who asks (runs in a worker thread: the key store is SQLite)."""
    return door_of(request).admit(
        authorization=request.headers.get("authorization"),
        query_keys=request.query_params.keys(),
        address=request.client.host if request.client else "unknown",
        url_space=request.path_params.get("space"),
        host=request.headers.getlist("host"),
        origin=request.headers.getlist("origin"),
    )


async def _current_caller(request: Request) -> Caller:
    return await offload(caller_of, request)


async def _provider(request: Request) -> Provider:
    # async, so FastAPI calls it on the event loop rather than handing it a worker thread
    return door_of(request).provider


Who = Annotated[Caller, Depends(_current_caller)]
Served = Annotated[Provider, Depends(_provider)]
PathQ = Annotated[str, Query(description="absolute AFI path, e.g. /facts/x.md")]
