"""The agent's ordinary tools (Read, Write, Edit, Glob, Grep, Bash) and the workspace they work in."""

from __future__ import annotations

from skills_app.core.tools.base import (
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolResult,
)
from skills_app.core.tools.bash import BashLimits, BashTool
from skills_app.core.tools.env import command_with_env, skill_run_env
from skills_app.core.tools.files import EditTool, ReadTool, WriteTool
from skills_app.core.tools.sandbox import SandboxStatus, describe_sandbox
from skills_app.core.tools.search import GlobTool, GrepTool
from skills_app.core.tools.workspace import (
    Workspace,
    WorkspaceError,
    WorkspaceFileError,
    open_workspace_file,
    skill_folder_name,
)


def default_tools() -> ToolRegistry:
    """Read, Write, Edit, Glob, Grep and Bash, in that order."""
    return ToolRegistry([ReadTool(), WriteTool(), EditTool(), GlobTool(), GrepTool(), BashTool()])


__all__ = [
    "BashLimits",
    "BashTool",
    "EditTool",
    "GlobTool",
    "GrepTool",
    "ReadTool",
    "SandboxStatus",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "Workspace",
    "WorkspaceError",
    "WorkspaceFileError",
    "WriteTool",
    "command_with_env",
    "default_tools",
    "describe_sandbox",
    "open_workspace_file",
    "skill_folder_name",
    "skill_run_env",
]
