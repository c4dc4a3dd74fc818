"""A tool definition as a server lists it, its content hash, and the `mcp__server__tool` names."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

# Server and tool parts of a model-facing name (the rules' MCP_PART, and the API's own limit of
# 64 characters for a whole tool name).
NAME_PART = re.compile(r"[A-Za-z0-9_-]+")
MAX_TOOL_NAME = 64


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """Everything a server says about one tool; a change to any part is a new definition."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def content_hash(self) -> str:
        """sha256 over every part, as canonical JSON: the identity a review approves."""
        canonical = json.dumps(
            {
                "name": self.name,
                "description": self.description,
                "input_schema": self.input_schema,
                "annotations": self.annotations,
                "_meta": self.meta,
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def definition_from_sdk(tool: Any) -> ToolDefinition:
    """The definition of an SDK `Tool` (mcp_types), with the wire's own field names read back."""
    wire: dict[str, Any] = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    return ToolDefinition(
        name=str(wire.get("name", "")),
        description=str(wire.get("description") or ""),
        input_schema=dict(wire.get("inputSchema") or {}),
        annotations=dict(wire.get("annotations") or {}),
        meta=dict(wire.get("_meta") or {}),
    )


def model_tool_name(server: str, tool: str) -> str | None:
    """`mcp__server__tool`, or None when the name cannot be offered to the model as it is."""
    name = f"mcp__{server}__{tool}"
    if not NAME_PART.fullmatch(server) or "__" in server or not NAME_PART.fullmatch(tool):
        return None
    return name if len(name) <= MAX_TOOL_NAME else None


def split_model_tool_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of `mcp__server__tool`, or None for any other name."""
    if not name.startswith("mcp__"):
        return None
    server, sep, tool = name[5:].partition("__")
    return (server, tool) if sep and server and tool else None
