"""The sync routes: another store (``afi sync https://…``) reads this store's changes and applies its own.

``GET /sync/store`` names this store; ``GET /sync/changes?since=N&peer=ID`` is a batch of the space's
note changes after ``since`` for that peer; ``GET /sync/received?peer=ID`` is how far this store has
applied the peer's; ``POST /sync/apply?label=L`` applies a peer's batch (the body) in one transaction.
``/sync/files/changes``, ``/sync/files/received`` and ``/sync/files/apply`` do the same for the
workspace's file versions (with their bytes, base64). Same door as the AFI routes (bearer key,
space, rate limit); each needs ``afi:admin`` on the space, and answers 405 ``unsupported`` when the
provider does not sync. The provider checks the batch; the route only translates.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse

from afi.errors import Unsupported
from afi.provider import Provider, SyncProvider

from ..offload import offload
from .door import Served, Who

__all__ = ["router"]

router = APIRouter()

Peer = Annotated[str, Query(min_length=1, max_length=64, description="the asking store's id")]


def _syncing(provider: Provider) -> SyncProvider:
    if not isinstance(provider, SyncProvider):
        raise Unsupported("this provider does not sync")
    return provider


@router.get("/sync/store", summary="This store's id among the stores it syncs with", tags=["sync"])
async def store(provider: Served, who: Who) -> JSONResponse:
    syncing = _syncing(provider)
    who.require("afi:admin", path="/")
    return JSONResponse({"store": await offload(syncing.store_id)})


@router.get("/sync/changes", summary="A batch of the space's changes for a peer", tags=["sync"])
async def changes(provider: Served, who: Who, peer: Peer,
                  since: Annotated[int, Query(ge=0, lt=2**63)] = 0) -> JSONResponse:  # fmt: skip
    syncing = _syncing(provider)
    return JSONResponse(await offload(syncing.sync_changes, who, since=since, peer=peer))


@router.get("/sync/received", summary="How far this store has applied a peer's changes", tags=["sync"])
async def received(provider: Served, who: Who, peer: Peer) -> JSONResponse:
    syncing = _syncing(provider)
    return JSONResponse({"received": await offload(syncing.sync_received, who, peer)})


@router.post("/sync/apply", summary="Apply a peer's batch in one transaction", tags=["sync", "write"])
async def apply(provider: Served, who: Who, batch: Annotated[Any, Body()],
                label: Annotated[str, Query(min_length=1, max_length=500)] = "peer") -> JSONResponse:  # fmt: skip
    syncing = _syncing(provider)
    applied = await offload(syncing.sync_apply, who, batch, label=label)
    return JSONResponse(applied.to_json())


@router.get("/sync/files/changes", summary="A batch of the space's file versions for a peer", tags=["sync"])
async def file_changes(provider: Served, who: Who, peer: Peer,
                       since: Annotated[int, Query(ge=0, lt=2**63)] = 0) -> JSONResponse:  # fmt: skip
    syncing = _syncing(provider)
    return JSONResponse(await offload(syncing.sync_file_changes, who, since=since, peer=peer))


@router.get("/sync/files/received", summary="How far this store has applied a peer's file versions", tags=["sync"])
async def files_received(provider: Served, who: Who, peer: Peer) -> JSONResponse:
    syncing = _syncing(provider)
    return JSONResponse({"received": await offload(syncing.sync_received_files, who, peer)})


@router.post(
    "/sync/files/apply", summary="Add a peer's file versions; bring their paths on disk", tags=["sync", "write"]
)
async def apply_files(provider: Served, who: Who, batch: Annotated[Any, Body()],
                      label: Annotated[str, Query(min_length=1, max_length=500)] = "peer") -> JSONResponse:  # fmt: skip
    syncing = _syncing(provider)
    applied = await offload(syncing.sync_apply_files, who, batch, label=label)
    return JSONResponse(applied.to_json())
