"""The agent's ordinary tools (Read, Write, Edit, Glob, Grep, Bash) and the workspace they work in."""

from __future__ import annotations

from skills_app.core.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolResult,
    default_tools,
)
from skills_app.core.tools.bash import BashLimits, BashTool
from skills_app.core.tools.files import EditTool, ReadTool, WriteTool
from skills_app.core.tools.search import GlobTool, GrepTool
from skills_app.core.tools.workspace import Workspace, WorkspaceError, skill_folder_name

__all__ = [
    "BashLimits",
    "BashTool",
    "EditTool",
    "GlobTool",
    "GrepTool",
    "ReadTool",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "Workspace",
    "WorkspaceError",
    "WriteTool",
    "default_tools",
    "skill_folder_name",
]
