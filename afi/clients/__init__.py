"""AFI clients, one interface (:class:`AfiClient`) over each door, for the conformance kit, the CLI and tests.

:class:`LocalClient` calls a provider in-process, :class:`HttpClient` speaks the HTTP/JSON binding,
:class:`FsClient` makes ``os`` calls on a mount, :class:`SshClient` drives ``ssh``/``sftp``, and
:class:`~afi.clients.mcp.McpClient` speaks MCP (import it from :mod:`afi.clients.mcp`: it loads the
MCP SDK). Clients import only the contract, never the conformance kit, a provider or a binding.
"""

from __future__ import annotations

from .base import AfiClient, CannotExpress, as_search_request, search_body
from .fs import FsClient
from .http import HttpClient
from .local import LocalClient
from .ssh import SshClient

__all__ = [
    "AfiClient",
    "CannotExpress",
    "FsClient",
    "HttpClient",
    "LocalClient",
    "SshClient",
    "as_search_request",
    "search_body",
]
