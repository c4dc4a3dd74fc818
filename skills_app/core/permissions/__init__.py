"""Permission rules: parse them, decide allow / ask / deny for a tool call, read shell commands.

`from skills_app.core.permissions import X` keeps working for every name the single module had.
"""

from __future__ import annotations

from .bash import decide_bash, deny_subjects
from .decide import decide, read_filter, removed_tools
from .model import (
    BEHAVIORS,
    DEFAULTS,
    KNOWN_TOOLS,
    SOURCES,
    Decision,
    McpHints,
    PermissionContext,
    Rule,
    RuleSyntaxError,
    ToolCall,
    describe,
)
from .rules import call_as_rule_text, grant_rule_for, parse_call, parse_rule
from .shell import ShellAnalysis, SimpleCommand, analyze

__all__ = [
    "BEHAVIORS",
    "DEFAULTS",
    "KNOWN_TOOLS",
    "SOURCES",
    "Decision",
    "McpHints",
    "PermissionContext",
    "Rule",
    "RuleSyntaxError",
    "ShellAnalysis",
    "SimpleCommand",
    "ToolCall",
    "analyze",
    "call_as_rule_text",
    "decide",
    "decide_bash",
    "deny_subjects",
    "describe",
    "grant_rule_for",
    "parse_call",
    "parse_rule",
    "read_filter",
    "removed_tools",
]
