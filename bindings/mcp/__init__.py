"""The MCP binding: the tools and resources (:mod:`.binding`) and its two transports, Streamable HTTP
(:mod:`.http`) and stdio (:mod:`.stdio`)."""

from .binding import FabricSessions, McpBinding, RequestInfo, ToolNames, stdio_info
from .http import McpHttp, mount_mcp
from .stdio import stdio_streams
from .tools import ToolOutput, ToolSpec

__all__ = [
    "FabricSessions",
    "McpBinding",
    "McpHttp",
    "RequestInfo",
    "ToolNames",
    "ToolOutput",
    "ToolSpec",
    "mount_mcp",
    "stdio_info",
    "stdio_streams",
]
