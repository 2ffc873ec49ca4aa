"""Where ``afi serve`` serves the MCP endpoint, the built-in authorization server and the protected-resource
metadata: one list, so that the HTTP app can hold these paths while the doors behind them still load
(:mod:`afi.bindings.http.deferred`)."""

from __future__ import annotations

__all__ = [
    "AS_METADATA_PATH",
    "AUTHORIZE_PATH",
    "CONSENT_PATH",
    "MCP_ENDPOINT_PATHS",
    "MCP_METADATA_PATHS",
    "MCP_PATHS",
    "METADATA_PATH",
    "OAUTH_PATHS",
    "REGISTER_PATH",
    "REVOKE_PATH",
    "TOKEN_PATH",
]

METADATA_PATH = "/.well-known/oauth-protected-resource"
AS_METADATA_PATH = "/.well-known/oauth-authorization-server"
AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"
REGISTER_PATH = "/oauth/register"
REVOKE_PATH = "/oauth/revoke"
CONSENT_PATH = "/oauth/consent"
MCP_ENDPOINT_PATHS = ("/mcp", "/mcp/", "/spaces/{space}/mcp", "/spaces/{space}/mcp/")
MCP_METADATA_PATHS = (METADATA_PATH + "/mcp", METADATA_PATH + "/spaces/{space}/mcp")
MCP_PATHS = MCP_ENDPOINT_PATHS + MCP_METADATA_PATHS
OAUTH_PATHS = (AS_METADATA_PATH, AUTHORIZE_PATH, TOKEN_PATH, REGISTER_PATH, REVOKE_PATH, CONSENT_PATH)
