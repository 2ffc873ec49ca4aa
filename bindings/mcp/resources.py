"""MCP resources: the manifest as ``afi://manifest.json``, and every file as ``afi://{+path}``.

``resources/list`` lists the manifest, then the caller's notes (the files of :data:`NOTE_AREAS`, each
area in path order), :data:`PAGE_SIZE` a page with the MCP cursor; every file stays readable through
the template whether listed or not.

``afi://facts/coffee.md`` (or ``afi:///facts/coffee.md``) reads ``/facts/coffee.md``. Text comes back
as text, other bytes as a base64 blob, each with the content type. An AfiError becomes an MCP error
whose message is the error's message and whose ``data`` is the error object.
"""

from __future__ import annotations

import base64
import binascii
import json

import mcp_types as types
from mcp.shared.exceptions import MCPError

from afi.errors import AfiError, InvalidPath, NotFound
from afi.model import Entry
from afi.provider import Caller, Provider

from ..offload import offload

__all__ = [
    "MANIFEST_URI",
    "NOTE_AREAS",
    "PAGE_SIZE",
    "list_resources",
    "list_templates",
    "mcp_error",
    "read_resource",
    "resource_path",
]

MANIFEST_URI = "afi://manifest.json"
SCHEME = "afi://"
RESOURCE_NOT_FOUND = -32002  # the MCP spec's code for a resource that does not exist
_CODES = {"not_found": RESOURCE_NOT_FOUND, "invalid_path": types.INVALID_PARAMS}
NOTE_AREAS = ("/facts", "/procedures", "/episodes", "/working")  # the current notes (not /history, /files)
PAGE_SIZE = 100


def resource_path(uri: str) -> str:
    """Given an ``afi://`` URI, return the AFI path it names."""
    if uri == MANIFEST_URI:
        return "/.afi/manifest.json"
    if not uri.startswith(SCHEME):
        raise InvalidPath(f"resources here are afi:// URIs, not {uri!r}")
    return "/" + uri[len(SCHEME) :].lstrip("/")


def _manifest() -> types.Resource:
    return types.Resource(
        uri=MANIFEST_URI,
        name="manifest",
        title="AFI manifest",
        description="What this provider offers: profile, verbs, search modes, limits.",
        mime_type="application/json",
    )


def _note(entry: Entry) -> types.Resource:
    name = entry.path.lstrip("/")
    return types.Resource(
        uri=SCHEME + name, name=name, mime_type=entry.content_type, size=entry.size, description=entry.path
    )


def _cursor(area: int, after: str | None) -> str:
    raw = json.dumps([area, after], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii")


def _position(cursor: str | None) -> tuple[int, str | None]:
    """Given the MCP cursor (None: the first page), return the area index and the provider's cursor in it.

    Raises:
        InvalidPath: not a cursor this server handed out.
    """
    if cursor is None:
        return 0, None
    try:
        area, after = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
    except (ValueError, TypeError, UnicodeError, binascii.Error):
        raise InvalidPath("the cursor is not one resources/list handed out; start again without one") from None
    if not isinstance(area, int) or not 0 <= area < len(NOTE_AREAS) or not isinstance(after, str | None):
        raise InvalidPath("the cursor is not one resources/list handed out; start again without one")
    return area, after


def list_resources(
    provider: Provider, caller: Caller, cursor: str | None = None, page_size: int = PAGE_SIZE
) -> types.ListResourcesResult:
    """Given a caller and the cursor of the page asked for, return the manifest (first page) and the
    caller's notes, at most ``page_size`` a page, with the cursor of the next page while more remain.

    Raises:
        InvalidPath: a cursor this server did not hand out.
    """
    area, after = _position(cursor)
    resources = [_manifest()] if cursor is None else []
    while area < len(NOTE_AREAS) and len(resources) < page_size:
        try:
            page = provider.list(caller, NOTE_AREAS[area], limit=page_size - len(resources), cursor=after)
        except NotFound:  # a provider without this area
            page = None
        if page is not None:
            resources += [_note(entry) for entry in page.entries if entry.type == "file"]
        if page is not None and page.next_cursor is not None:
            after = page.next_cursor
            return types.ListResourcesResult(resources=resources, next_cursor=_cursor(area, after))
        area, after = area + 1, None
    more = area < len(NOTE_AREAS)
    return types.ListResourcesResult(resources=resources, next_cursor=_cursor(area, None) if more else None)


def list_templates() -> types.ListResourceTemplatesResult:
    """Return the template every file and note is readable through."""
    template = types.ResourceTemplate(
        uri_template="afi://{+path}",
        name="afi-path",
        title="A file or note of the memory",
        description="Any file of the tree by its path, e.g. afi://facts/coffee.md or afi://files/notes/todo.txt.",
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


def mcp_error(err: AfiError) -> MCPError:
    """Given an AfiError, return the MCP error a resource request answers with."""
    body = err.to_dict()
    return MCPError(_CODES.get(err.code, types.INTERNAL_ERROR), err.message, body)


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
        raise mcp_error(err) from None
