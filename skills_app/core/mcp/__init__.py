"""MCP servers as tools: definitions and their hash, the SDK's client in the sandbox, the tool.

Plain Python over the official `mcp` SDK; what is stored and who may see what lives in
`skills_app/mcp/`.
"""

from __future__ import annotations

from skills_app.core.mcp.connect import (
    McpConnectError,
    ServerSpec,
    call_tool,
    list_tools,
)
from skills_app.core.mcp.definitions import (
    ToolDefinition,
    definition_from_sdk,
    model_tool_name,
    split_model_tool_name,
)
from skills_app.core.mcp.tool import CallRecord, McpTool

__all__ = [
    "CallRecord",
    "McpConnectError",
    "McpTool",
    "ServerSpec",
    "ToolDefinition",
    "call_tool",
    "definition_from_sdk",
    "list_tools",
    "model_tool_name",
    "split_model_tool_name",
]
