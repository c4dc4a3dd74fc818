"""Approval prompts in plain words: what the call will do, with paths relative to the workspace.

A person answering "Allow?" needs the action ("Run a command: `make test`", "Write
`out/report.md`"), not the rule syntax; the rule that asked goes behind a "why?" disclosure.
No absolute server path reaches the chat: the workspace root is cut from every path, command
and reason shown (a workspace path `out/x` is what the person can find and download).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from skills_app.models import Approval

# Tools whose input names one file, and the verb that says what happens to it.
_FILE_VERBS = {
    "Read": ("Read", "reading"),
    "Write": ("Write", "writing"),
    "Edit": ("Edit", "editing"),
    "NotebookEdit": ("Edit", "editing"),
}
_SKILL_LOADERS = {"Skill", "load_skill", "skill_load"}


@dataclass(frozen=True, slots=True)
class Action:
    """What a call does, in words: a verb phrase and the one thing it acts on (shown as code)."""

    title: str  # "Allow running a command?"
    verb: str  # "Run a command:"
    subject: str  # the command, path, URL or skill name, workspace-relative
    answered: str  # "ran a command" style phrase for the compact answered line


def workspace_roots(conversation_id: int) -> list[str]:
    """The spellings of this conversation's workspace root that may appear in a call."""
    base = Path(settings.WORKSPACE_ROOT) / str(conversation_id)
    roots = {str(base), str(base.resolve())}
    # Longest first, so a resolved path is not left half-cut by a shorter spelling.
    return sorted(roots, key=len, reverse=True)


def relative(text: str, roots: list[str]) -> str:
    """`text` with every workspace root cut: "/srv/ws/2/out/a.md" -> "out/a.md", root -> "."."""
    for root in roots:
        text = text.replace(root + "/", "").replace(root, ".")
    return text


def describe_action(tool: str, tool_input: Any, roots: list[str]) -> Action:
    """The action a call of `tool` asks about, in words.

    `tool_input` is the call's input as the viewer may see it (already through their outbound
    filter): every field may end up in the title, the action line or the call shown.
    """
    data = tool_input if isinstance(tool_input, dict) else {}

    def field(*names: str) -> str:
        for name in names:
            value = data.get(name)
            if isinstance(value, str) and value:
                return relative(value, roots)
        return ""

    if tool == "Bash":
        return Action("Allow running a command?", "Run a command:", field("command"), "command")
    if tool == "skill_run":
        return Action(
            "Allow running a command?",
            f'Run a command of the "{field("skill")}" skill:',
            field("command"),
            "command",
        )
    if tool in _FILE_VERBS:
        verb, doing = _FILE_VERBS[tool]
        return Action(
            f"Allow {doing} a file?", verb, field("file_path", "path", "notebook_path"), doing
        )
    if tool in ("Glob", "Grep"):
        where = field("path") or "the workspace"
        return Action("Allow searching files?", f"Search {where} for", field("pattern"), "search")
    if tool == "WebFetch":
        return Action("Allow fetching a web page?", "Fetch", field("url"), "fetch")
    if tool in _SKILL_LOADERS:
        name = field("skill", "command", "name")
        args = field("args")
        return Action(
            "Allow loading a skill?",
            "The model wants to load the skill",
            f"{name} {args}".strip(),
            "skill",
        )
    # Cut after the roots are: a cut through a root would leave the server's path half shown.
    text = relative(json.dumps(data, ensure_ascii=False), roots)[:200]
    return Action(f"Allow the {tool} tool?", f"Use {tool} with", text, tool)


def why_text(approval: Approval, roots: list[str]) -> str:
    """Why this was asked: the rule (or the default) in a sentence, paths relative."""
    if approval.rule_text:
        why = f"The rule “{approval.rule_text}” asks before this."
    else:
        why = f"Nothing allows {approval.tool} calls like this, so you are asked each time."
    if approval.skill:
        why += f' The "{approval.skill}" skill was active.'
    return relative(why, roots)


def arguments_text(data: Any, roots: list[str]) -> str:
    """The call's full input as JSON, paths relative."""
    return relative(json.dumps(data, indent=2, ensure_ascii=False), roots)
