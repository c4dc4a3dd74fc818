"""The tool contract: errors, results, the per-call context, the Tool protocol and the registry."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from skills_app.core.tools.errors import ToolError
from skills_app.core.tools.storage import StorageGate
from skills_app.core.tools.workspace import Workspace

__all__ = ["Tool", "ToolContext", "ToolError", "ToolRegistry", "ToolResult"]


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    is_error: bool = False
    # Workspace-relative paths under out/ that this call created or changed.
    artifacts: tuple[str, ...] = ()
    # Content blocks the model gets after the text in the tool_result (an MCP result's images,
    # as image blocks of the Messages API); the chat shows the text only.
    blocks: tuple[Mapping[str, Any], ...] = ()
    # Facts of the call for its telemetry span (an MCP call's server, definition hash, sizes,
    # duration), as attribute names and values; never content.
    telemetry: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolContext:
    workspace: Workspace
    # Extra environment for Bash (e.g. SKILL_DIR of the active skill); nothing else reaches it.
    env: Mapping[str, str] = field(default_factory=dict)
    # "auto" | "bwrap" | "none"; see tools.sandbox. Without a sandbox, commands run only when
    # the user holds the "run unsandboxed commands" permission.
    sandbox: str = "auto"
    unsandboxed_allowed: bool = False
    # Server folders to mask inside the sandbox if they lie under a read-only system bind.
    sandbox_hidden_paths: tuple[str, ...] = ()
    # Read-rule filter for search results: given a file's absolute path, False hides it from
    # Grep and Glob (built by permissions.read_filter from the Read deny rules).
    path_allowed: Callable[[str], bool] | None = None
    bash_timeout_default: int = 120
    bash_timeout_max: int = 600
    output_limit: int = 30_000
    # The person's storage quota (None: unlimited, e.g. tests and the command line).
    storage: StorageGate | None = None


@runtime_checkable
class Tool(Protocol):
    name: str
    description: str
    input_schema: dict[str, Any]

    async def run(self, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Run one call; raise ToolError for mistakes the caller can fix."""
        ...


class ToolRegistry:
    """An ordered, name-keyed set of tools; the order is the order given."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"Two tools are named {tool.name!r}; tool names must be unique.")
            self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or None."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """Tool names in registry order."""
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """The tool definitions the model sees, in registry order."""
        return [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in self._tools.values()
        ]

    def without(self, names: Iterable[str]) -> ToolRegistry:
        """A new registry minus the named tools (unknown names are ignored)."""
        drop = set(names)
        return ToolRegistry(t for n, t in self._tools.items() if n not in drop)

    async def call(self, name: str, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Run a tool by name, turning ToolError and unknown names into error results."""
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return ToolResult(f"No tool named {name!r}. Available tools: {known}.", is_error=True)
        try:
            return await tool.run(input, ctx)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


# --- output helper shared by the tools ------------------------------------------------------


def cap_text(text: str, limit: int) -> str:
    """Cut `text` to about `limit` characters, keeping head and tail and saying how much went."""
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    cut = len(text) - 2 * half
    return f"{text[:half]}\n\n[... {cut} characters cut ...]\n\n{text[-half:]}"
