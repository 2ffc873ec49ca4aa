"""MCP resources: the manifest as ``afi://manifest.json``, and every file as ``afi://{+path}``.

``afi://facts/coffee.md`` (or ``afi:///facts/coffee.md``) reads ``/facts/coffee.md``. Text comes back
as text, other bytes as a base64 blob, each with the content type. An AfiError becomes an MCP error
whose message is the error JSON and whose ``data`` is the error object.
"""

from __future__ import annotations

import base64
import json

import mcp_types as types
from mcp.shared.exceptions import MCPError

from afi.errors import AfiError, InvalidPath
from afi.provider import Caller, Provider

from ..offload import offload

__all__ = ["MANIFEST_URI", "list_resources", "list_templates", "read_resource", "resource_path"]

MANIFEST_URI = "afi://manifest.json"
SCHEME = "afi://"
RESOURCE_NOT_FOUND = -32002  # the MCP spec's code for a resource that does not exist
_CODES = {"not_found": RESOURCE_NOT_FOUND, "invalid_path": types.INVALID_PARAMS}


def resource_path(uri: str) -> str:
    """Given an ``afi://`` URI, return the AFI path it names."""
    if uri == MANIFEST_URI:
        return "/.afi/manifest.json"
    if not uri.startswith(SCHEME):
        raise InvalidPath(f"resources here are afi:// URIs, not {uri!r}")
    return "/" + uri[len(SCHEME) :].lstrip("/")


def list_resources() -> types.ListResourcesResult:
    """Return the fixed resources: the manifest."""
    manifest = types.Resource(
        uri=MANIFEST_URI,
        name="manifest",
        title="AFI manifest",
        description="What this provider offers: profile, verbs, search modes, limits.",
        mime_type="application/json",
    )
    return types.ListResourcesResult(resources=[manifest])


def list_templates() -> types.ListResourceTemplatesResult:
    """Return the template every file and note is readable through."""
    template = types.ResourceTemplate(
        uri_template="afi://{+path}",
        name="afi-path",
        title="A file or note of the memory",
        description="Any file of the tree by its path, e.g. afi://facts/coffee.md or afi://files/notes/todo.txt.",
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


def _mcp_error(err: AfiError) -> MCPError:
    body = err.to_dict()
    return MCPError(_CODES.get(err.code, types.INTERNAL_ERROR), json.dumps(body, ensure_ascii=False), body)


async def read_resource(provider: Provider, caller: Caller, uri: str) -> types.ReadResourceResult:
    """Given a caller and an ``afi://`` URI, return its contents.

    Raises:
        MCPError: carrying the AfiError (``-32002`` for not_found).
    """

    def read() -> types.ReadResourceResult:
        path = resource_path(uri)
        result = provider.read(caller, path)
        try:
            text = result.data.decode("utf-8")
        except UnicodeDecodeError:
            blob = base64.b64encode(result.data).decode("ascii")
            return types.ReadResourceResult(
                contents=[types.BlobResourceContents(uri=uri, mime_type=result.content_type, blob=blob)]
            )
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=result.content_type, text=text)]
        )

    try:
        return await offload(read)
    except AfiError as err:
        raise _mcp_error(err) from None
