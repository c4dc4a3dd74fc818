"""A conversation as Markdown, as its reader sees it in the chat (beside the Claude Code JSONL).

For a person without the inspect permission: the rows they see (no hidden rows), their own words
and the model's prose as written, slash commands as commands, skills as status lines, and every
other text (tool inputs and results, errors, notices) through the conversation's outbound filter,
as in the chat and the JSONL export. For an inspector: every row, hidden ones marked as hidden
from the user. Replaced and excluded turns are marked with when and why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from django.utils import timezone

from skills_app.core.transcript import (
    EXCLUDED,
    REPLACED,
    parse_status_message,
    result_text,
    text_of,
)
from skills_app.models import Conversation, Message
from skills_app.visibility import Outbound, outbound

HIDDEN_LABELS = {
    "skill_prompt": "Injected skill instructions",
    "permissions": "Applied permissions",
}
EXCLUSION_WORDS = {
    "failed": "its turn failed; not sent to the model again",
    "refusal": "its turn was declined; not sent to the model again",
}


def fence(text: str, lang: str = "") -> str:
    """`text` in a code fence longer than any run of backticks inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    marks = "`" * max(3, longest + 1)
    return f"{marks}{lang}\n{text}\n{marks}"


def quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines() or [""])


def _texts(row: Message) -> str:
    return text_of(row.content)


def _status_note(row: Message) -> str:
    meta = row.meta or {}
    reason = meta.get(EXCLUDED)
    if reason == REPLACED:
        how = "an edit" if meta.get("replaced_by") == "edit" else "a regenerated answer"
        when = str(meta.get("replaced_at", ""))[:19].replace("T", " ")
        return f"*(Replaced by {how} at {when} UTC; not sent to the model again.)*"
    if reason in EXCLUSION_WORDS:
        return f"*({EXCLUSION_WORDS[reason]}.)*"
    return ""


def _assistant(row: Message, out: Outbound) -> list[str]:
    parts: list[str] = []
    for block in row.content:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            parts.append(str(block["text"]))  # the model's prose, as the chat shows it
        elif kind == "thinking" and block.get("thinking"):
            parts.append("*Thinking:*\n\n" + quote(str(block["thinking"])))
        elif kind == "tool_use":
            shown = out.call_input(str(block.get("name", "")), block.get("input") or {})
            body = json.dumps(shown, indent=2, ensure_ascii=False)
            parts.append(f"**Tool call** `{block.get('name', '?')}`\n\n" + fence(body, "json"))
    return parts


def _tool_results(row: Message, out: Outbound) -> list[str]:
    parts = []
    for block in row.content:
        if block.get("type") == "tool_result":
            label = "**Tool error**" if block.get("is_error") else "**Tool result**"
            parts.append(label + "\n\n" + fence(out.text(result_text(block))))
    return parts


def _row(row: Message, out: Outbound) -> list[str]:
    """The Markdown of one row: a heading line, then its parts."""
    text = _texts(row)
    if row.is_meta:
        label = HIDDEN_LABELS.get(row.kind, "Hidden message")
        body = text or json.dumps(row.content, indent=2, ensure_ascii=False)
        return [f"### [Hidden from the user] {label}", quote(body)]
    if row.kind == "skill_status":
        status = parse_status_message(text)
        if status is None:
            return [f"*{out.text(text)}*"]
        args = f" with `{status['args']}`" if status["args"] else ""
        return [f'*The "{status["name"]}" skill was loaded{args}.*']
    if row.kind in ("error", "notice"):
        return [quote(f"**{row.kind.capitalize()}:** " + out.text(text))]
    if row.kind == "tool_result":
        return _tool_results(row, out)
    if row.kind == "attachments":
        files = row.meta.get("attachments", []) if isinstance(row.meta, dict) else []
        names = [f"- `{info.get('path') or info.get('name', '?')}`" for info in files]
        return ["## You (files)", "\n".join(names)]
    if row.role == Message.USER:
        if row.kind == "command":
            return ["## You (command)", fence(text)]
        return ["## You", text]
    return ["## Assistant", *_assistant(row, out)]


def export_markdown(conversation: Conversation, *, include_hidden: bool) -> Iterator[str]:
    """The conversation as Markdown pieces; hidden rows (marked) only when `include_hidden`."""
    out = outbound(conversation.pk, can_inspect=include_hidden)
    rows = conversation.messages.order_by("seq")
    if not include_hidden:
        rows = rows.filter(is_meta=False)
    now = timezone.now().strftime("%Y-%m-%d %H:%M UTC")
    yield f"# {conversation.title}\n\n"
    note = f"Exported from Skillscope on {now}."
    if include_hidden:
        note += (
            " This export includes hidden content (injected skill instructions and other rows"
            " the user never saw); each such part is headed **[Hidden from the user]**."
        )
    yield note + "\n"
    previous_role = ""
    for row in rows.iterator():
        parts = _row(row, out)
        # An answer spread over several rows (text, tool calls, results) stays under one heading.
        if parts and parts[0] == "## Assistant" and previous_role == "assistant":
            parts = parts[1:]
        if parts and parts[0].startswith("## "):
            previous_role = "assistant" if parts[0] == "## Assistant" else "user"
        elif row.role == Message.USER and row.kind != "tool_result" and not row.is_meta:
            previous_role = "user"
        note = _status_note(row)
        if note:
            parts.append(note)
        if parts:
            yield "\n" + "\n\n".join(p for p in parts if p) + "\n"


def export_markdown_text(conversation: Conversation, *, include_hidden: bool) -> str:
    return "".join(export_markdown(conversation, include_hidden=include_hidden))


__all__ = ["export_markdown", "export_markdown_text", "fence"]
