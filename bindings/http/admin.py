"""The audit and key routes: ``GET /audit``, ``GET /keys``, ``POST /keys``, ``DELETE /keys/{id}``.

Same door as the AFI routes (bearer key, space, rate limit). The audit rows are the caller's space's
(``afi:read``); the keys need ``afi:admin`` and are the caller's space's. ``POST /keys`` answers the
new key's token once. The routes only translate: the provider's verbs
(:class:`~afi.provider.AdminProvider`) do the work, and answer 405 ``unsupported`` when it has none.
:data:`router` is mounted at the root and per space.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from afi.errors import Unsupported
from afi.provider import AdminProvider, Provider

from ..offload import offload
from .door import Served, Who

__all__ = ["router"]


class KeyBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scopes: list[str] = Field(default_factory=lambda: ["afi:read"], description="afi:read, afi:write, afi:admin")
    name: str | None = Field(default=None, max_length=200)


def _admin(provider: Provider) -> AdminProvider:
    if not isinstance(provider, AdminProvider):
        raise Unsupported("this provider keeps no audit log or keys")
    return provider


router = APIRouter()


@router.get("/audit", summary="The audit log of this space, newest first", tags=["admin"])
async def audit(provider: Served, who: Who, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> JSONResponse:
    return JSONResponse({"rows": await offload(_admin(provider).audit_rows, who, limit=limit)})


@router.get("/keys", summary="The API keys of this space (afi:admin; never a token)", tags=["admin"])
async def keys(provider: Served, who: Who) -> JSONResponse:
    return JSONResponse({"keys": await offload(_admin(provider).keys_list, who)})


@router.post("/keys", summary="Create an API key for this space (afi:admin; its token shown once)", tags=["admin"])
async def create_key(provider: Served, who: Who, body: KeyBody) -> JSONResponse:
    return JSONResponse(await offload(_admin(provider).key_create, who, body.scopes, body.name), status_code=201)


@router.delete("/keys/{key_id}", summary="Revoke an API key of this space (afi:admin)", tags=["admin"])
async def revoke_key(provider: Served, who: Who, key_id: str) -> JSONResponse:
    return JSONResponse(await offload(_admin(provider).key_revoke, who, key_id))
