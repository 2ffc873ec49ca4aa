"""Where ``afi serve`` serves the MCP endpoint, the built-in authorization server and the protected-resource
metadata: one list, so that the HTTP app can hold these paths while the doors behind them still load
(:mod:`afi.bindings.http.deferred`)."""

from __future__ import annotations

__all__ = ["AS_METADATA_PATH", "CONSENT_PATH", "MCP_PATHS", "METADATA_PATH", "OAUTH_PATHS"]

METADATA_PATH = "/.well-known/oauth-protected-resource"
AS_METADATA_PATH = "/.well-known/oauth-authorization-server"
CONSENT_PATH = "/oauth/consent"
MCP_PATHS = (
    "/mcp",
    "/mcp/",
    "/spaces/{space}/mcp",
    "/spaces/{space}/mcp/",
    METADATA_PATH + "/mcp",
    METADATA_PATH + "/spaces/{space}/mcp",
)
OAUTH_PATHS = (AS_METADATA_PATH, "/oauth/authorize", "/oauth/token", "/oauth/register", "/oauth/revoke", CONSENT_PATH)
