"""The load bench's floor: a bare Starlette app answering one fixed JSON body, served as ``afi serve`` is.

``python -m bench._load_floor [--workers N]`` listens on 127.0.0.1, a port the kernel picks, and prints
``afi: listening on http://…`` as ``afi serve`` does. It is served the same way: the same uvicorn
``ServerConfig`` (h11 with the server's header and body limits, ``TCP_NODELAY`` on every connection),
and with ``--workers N`` the same supervisor handing each worker its own ``SO_REUSEPORT`` socket. Every
request (any method, any path) is read to its end and answered ``200`` with the same JSON body, so the
load bench's clients can send it the very requests they send ``afi serve``: what a request costs there
beyond this is what afi-memory costs; what this costs is the machine, Python, uvicorn and the load
generator, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

# afi serve's own serving pieces, so the floor differs from it only by the app
from afi.app.serve import WORKER_SILENCE_SECONDS, Listen, _OneSocketEach, _worker_sockets, end_with_supervisor

__all__ = ["BODY", "floor_app", "main"]

# About the size of an /afi/stat answer: a fixed body, so no request costs more than another.
BODY = json.dumps({
    "path": "/facts/n000001.md", "kind": "file", "size": 212, "mtime": "2026-12-01T09:04:46Z",
    "etag": "\"7b0c6e1f2a\"", "meta": {"kind": "fact", "importance": 0.5, "tags": []},
}).encode()  # fmt: skip
_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"]


async def _answer(request: Request) -> Response:
    await request.body()  # a search's JSON body is read, as afi serve reads it
    return Response(BODY, media_type="application/json")


def floor_app() -> Starlette:
    """Return the floor's ASGI app: every path and method answered 200 with ``BODY``."""
    end_with_supervisor()
    return Starlette(routes=[Route("/{path:path}", _answer, methods=_METHODS)])


class _Announcing(uvicorn.Server):
    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        for listener in getattr(self, "servers", []):
            for sock in listener.sockets:
                _announce(sock.getsockname())


def _announce(name: tuple[Any, ...]) -> None:
    print(f"afi: listening on http://{name[0]}:{name[1]} (the floor: a bare Starlette app)", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Given command-line arguments, serve the floor until SIGTERM; return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m bench._load_floor", description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=1, help="worker processes, as afi serve --workers")
    args = parser.parse_args(argv)
    listen = Listen(host="127.0.0.1", port=0)
    if args.workers <= 1:
        _Announcing(listen.config(floor_app())).run()
        return 0
    config = listen.config(
        "bench._load_floor:floor_app",  # importable in a worker
        workers=args.workers,
        factory=True,
        timeout_worker_healthcheck=WORKER_SILENCE_SECONDS,
    )
    sockets = _worker_sockets(config, args.workers)
    _announce(sockets[0].getsockname())
    _OneSocketEach(config, sockets=sockets).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
