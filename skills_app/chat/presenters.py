"""How stored messages look to a person: plain text for the CLI, view data for templates.

Hidden (`is_meta`) rows never pass through here for a viewer without the inspect permission:
callers filter them out first; these helpers refuse them as a second guard.
"""

from __future__ import annotations

import json
from typing import Any

from skills_app.core.transcript import parse_status_message, result_text, text_of
from skills_app.models import Message

SUMMARY_LIMIT = 160


class HiddenContentError(Exception):
    """Raised when hidden content would be presented to someone who may not see it."""


def tool_summary(name: str, tool_input: dict[str, Any]) -> str:
    """One line describing a tool call, e.g. `Bash: python3 stats.py notes.md`."""
    # tool-result "as the source design" brings s05's own tools (bash, read_file, ...).
    if name in {"Bash", "bash"}:
        detail = tool_input.get("command", "")
    elif name in {"Read", "Write", "Edit", "read_file", "write_file", "edit_file"}:
        detail = tool_input.get("file_path") or tool_input.get("path", "")
    elif name in {"Glob", "Grep"}:
        detail = tool_input.get("pattern", "")
        if tool_input.get("path"):
            detail += f" in {tool_input['path']}"
    elif name == "Skill":
        detail = tool_input.get("skill") or tool_input.get("command") or ""
        if tool_input.get("args"):
            detail += f" {tool_input['args']}"
    else:
        detail = json.dumps(tool_input, ensure_ascii=False)
    detail = " ".join(str(detail).split())
    if len(detail) > SUMMARY_LIMIT:
        detail = detail[: SUMMARY_LIMIT - 1] + "…"
    return f"{name}: {detail}" if detail else name


def message_plain_text(row: Message, *, allow_hidden: bool = False) -> str:
    """The visible text of one row for the terminal."""
    if row.is_meta and not allow_hidden:
        raise HiddenContentError(f"message {row.pk} is hidden")
    if row.kind == "skill_status":
        text = _text(row)
        # tool-result's slash chip holds what the user typed; its meta names the skill.
        status = parse_status_message(text) or {
            "name": row.meta.get("skill", "?"),
            "args": row.meta.get("args", ""),
        }
        line = f'[skill] The "{status["name"]}" skill is loading'
        if status["args"]:
            line += f" (args: {status['args']})"
        return line
    if row.kind in {"error", "notice"}:
        return f"[{row.kind}] {_text(row)}"
    lines: list[str] = []
    for block in row.content:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            prefix = "you: " if row.role == "user" else ""
            suffix = " [partial]" if row.meta.get("partial") else ""
            lines.append(prefix + block["text"] + suffix)
        elif kind == "tool_use":
            lines.append(f"[tool] {tool_summary(block['name'], block.get('input') or {})}")
        elif kind == "tool_result":
            text = result_text(block).strip()
            first = text.splitlines()[0] if text else "(no output)"
            mark = "error" if block.get("is_error") else "result"
            lines.append(f"[{mark}] {first[:SUMMARY_LIMIT]}")
    return "\n".join(lines)


def _text(row: Message) -> str:
    return text_of(row.content)
