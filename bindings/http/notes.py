"""The many-note remember over HTTP: ``POST /notes/remember`` with ``{notes: [{kind, content, ...}]}``.

Same door as the AFI routes (bearer key, space, rate limit); a write needs ``afi:write``. The route
only translates: the provider's ``remember_many`` (:class:`~afi.provider.NotesProvider`) checks,
embeds and writes the batch in one transaction, all or nothing (a refusal names the item,
``notes[3]: …``), and answers 405 ``unsupported`` when the provider remembers no notes. The answer
lists, in order, the note that now stands for each item: ``{id, kind, name, supersedes}``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from afi.errors import Unsupported
from afi.provider import NotesProvider

from ..offload import offload
from .door import Served, Who

__all__ = ["RememberBody", "router"]

router = APIRouter()


class RememberBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    notes: list[dict[str, Any]]


@router.post("/notes/remember", summary="Remember many notes in one transaction", tags=["write"])
async def remember_many(provider: Served, who: Who, body: RememberBody) -> JSONResponse:
    if not isinstance(provider, NotesProvider):
        raise Unsupported("this provider remembers no notes")
    notes = await offload(provider.remember_many, who, body.notes)
    return JSONResponse(
        {"notes": [{"id": n.id, "kind": n.kind, "name": n.name, "supersedes": n.supersedes} for n in notes]}
    )
