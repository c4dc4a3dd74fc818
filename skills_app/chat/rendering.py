"""How stored rows become HTML: Markdown for assistant text, and the transcript partials.

The chat page and the websocket consumer both call these functions, so a message looks the same
whether it was rendered on page load or pushed live. Hidden (`is_meta`) rows are refused here
unless the viewer may inspect injected content: callers filter first, this is the second guard.
"""

from __future__ import annotations

import json
from typing import Any

import nh3
from django.template.loader import render_to_string
from django.utils.html import escape
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from skills_app.chat.presenters import HiddenContentError, result_text, tool_summary
from skills_app.chat.usage import answer_usage
from skills_app.core.transcript import parse_status_message
from skills_app.models import Approval, Message

LINK_REL = "noopener noreferrer nofollow"
ALLOWED_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "img", "li", "ol", "p", "pre", "s", "span", "strong", "table", "tbody", "td", "th", "thead",
    "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "code": {"class"},
    "span": {"class"},
    "td": {"style"},
    "th": {"style"},
    "ol": {"start"},
}
# Table alignment is the only inline style markdown-it emits; nothing else may style the page.
ALLOWED_STYLES = {"text-align"}

_FORMATTER = HtmlFormatter(nowrap=True)
# Assistant rows whose blocks are rendered as text and tool cards.
ASSISTANT_CONTENT_KINDS = frozenset({"text", "tool_use"})


def _highlight(code: str, lang: str, _attrs: str) -> str:
    """Pygments spans for a fenced block; empty string lets markdown-it escape it plainly."""
    if not lang:
        return ""
    try:
        lexer = get_lexer_by_name(lang.strip().split()[0], stripall=False)
    except ClassNotFound:
        return ""
    return highlight(code, lexer, _FORMATTER)


# commonmark with raw HTML switched off: HTML in model output shows as text, never as markup.
_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "highlight": _highlight}).enable(
    ["table", "strikethrough"]
)


def markdown_html(text: str) -> str:
    """Markdown to sanitised HTML: tables, highlighted code, safe links, no raw HTML."""
    rendered = _MD.render(text or "")
    return nh3.clean(
        rendered,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        filter_style_properties=ALLOWED_STYLES,
        url_schemes={"http", "https", "mailto"},
        link_rel=LINK_REL,
    )


def message_text(row: Message) -> str:
    """The text blocks of a row joined."""
    return "\n".join(b.get("text", "") for b in row.content if b.get("type") == "text")


def skill_state(invocation: Any) -> str:
    """loaded / failed / denied for an invocation row, loading when there is none yet."""
    if invocation is None:
        return "loading"
    return {"allowed": "loaded", "denied": "denied"}.get(invocation.decision, "failed")


def render_message(row: Message, *, can_inspect: bool, ctx: dict[str, Any] | None = None) -> str:
    """The `_message.html` partial for one row (id `message-<id>`)."""
    if row.is_meta and not can_inspect:
        raise HiddenContentError(f"message {row.pk} is hidden")
    ctx = ctx or {}
    context: dict[str, Any] = {
        "m": row,
        "can_inspect": can_inspect,
        "conversation_id": row.conversation_id,
        "is_demo": bool(row.run and row.run.is_demo) if row.run_id else False,
    }
    if row.kind == "skill_status":
        status = parse_status_message(message_text(row)) or {
            "name": row.meta.get("skill", "?"),
            "args": row.meta.get("args", ""),
        }
        context.update(skill=status["name"], args=status["args"], state="loaded")
        if row.invocation_id and row.invocation is not None:
            context["state"] = skill_state(row.invocation)
    elif row.kind in {"skill_prompt", "permissions"} or row.is_meta:
        # The tool-result profile carries the body in a tool_result block.
        context["hidden_text"] = message_text(row) or "\n".join(
            result_text(b) for b in row.content if b.get("type") == "tool_result"
        )
    elif row.role == "assistant" and row.kind in ASSISTANT_CONTENT_KINDS:
        context["parts"] = _assistant_parts(row, ctx)
        context["usage"] = answer_usage(row)
    elif row.kind in {"error", "notice"}:
        context["text"] = message_text(row)
        context["code"] = row.meta.get("code", "")
        # One Retry, on the latest failed turn (the page says which); a live push is the latest.
        retry_id = ctx.get("retry_id", row.pk if row.meta.get("retry") else None)
        context["retry"] = retry_id == row.pk
        context["offer_summary"] = bool(row.meta.get("offer_new_conversation"))
    else:
        context["text"] = message_text(row)
    html = render_to_string("skills_app/chat/_message.html", context)
    subagent = row.meta.get("subagent_run") if isinstance(row.meta, dict) else None
    if subagent:
        # Rows of a forked skill's subagent sit in a nested, labelled block.
        label = escape(f'Subagent of the "{row.meta.get("subagent_skill", "")}" skill')
        html = (
            f'<div class="subagent" data-subagent-run="{int(subagent)}" data-label="{label}">'
            f"{html}</div>"
        )
    return html


def _assistant_parts(row: Message, ctx: dict[str, Any]) -> list[dict[str, Any]]:
    """Text and tool-call parts of one assistant row, consecutive tool calls grouped together."""
    parts: list[dict[str, Any]] = []
    results: dict[str, dict[str, Any]] = ctx.get("results", {})
    invocations: dict[str, Any] = ctx.get("invocations", {})
    delivered: set[str] = ctx.get("delivered", set())
    for block in row.content:
        kind = block.get("type")
        if kind == "thinking" and block.get("thinking"):
            # The model's own (summarized) reasoning: visible to the user, collapsed.
            parts.append({"kind": "thinking", "html": markdown_html(block["thinking"])})
        elif kind == "redacted_thinking":
            parts.append({"kind": "thinking", "redacted": True})
        elif kind == "text" and block.get("text"):
            parts.append({"kind": "text", "html": markdown_html(block["text"])})
        elif kind == "tool_use":
            tool_input = block.get("input") or {}
            if block.get("name") == "Skill":
                if block["id"] in delivered:
                    continue  # the skill's status chip is shown by its own row
                name = str(tool_input.get("skill") or tool_input.get("command") or "")
                parts.append(
                    {
                        "kind": "skill",
                        "html": render_skill_call(
                            block["id"],
                            name,
                            str(tool_input.get("args") or ""),
                            skill_state(invocations.get(block["id"])),
                            getattr(invocations.get(block["id"]), "error", ""),
                        ),
                    }
                )
                continue
            name = block.get("name", "?")
            summary = tool_summary(name, tool_input)
            result = results.get(block["id"])
            card = {
                "id": block["id"],
                "name": name,
                "summary": summary.removeprefix(f"{name}:").strip(),
                "arguments": json.dumps(tool_input, indent=2, ensure_ascii=False),
                "result": tool_result_context(row.conversation_id, result) if result else None,
            }
            if parts and parts[-1]["kind"] == "tools":
                parts[-1]["cards"].append(card)
            else:
                parts.append({"kind": "tools", "cards": [card]})
    return parts


def render_skill_call(tool_use_id: str, name: str, args: str, state: str, error: str = "") -> str:
    """The chip (id `skill-<tool_use_id>`) for a model's Skill call before or instead of its status row."""
    return render_to_string(
        "skills_app/chat/_skill_call.html",
        {"tool_use_id": tool_use_id, "skill": name, "args": args, "state": state, "error": error},
    )


def tool_result_context(conversation_id: int, data: dict[str, Any]) -> dict[str, Any]:
    """Template facts for a tool result from a `tool.result` event or a tool_result block."""
    artifacts = [
        {"path": path, "name": path.rsplit("/", 1)[-1]}
        for path in data.get("artifacts") or []
        if isinstance(path, str) and path.startswith("out/")
    ]
    return {
        "conversation_id": conversation_id,
        "content": str(data.get("content", "")),
        "is_error": bool(data.get("is_error")),
        "artifacts": artifacts,
        "decision": data.get("decision") or "",
        "reason": data.get("reason") or "",
    }


def result_from_block(block: dict[str, Any]) -> dict[str, Any]:
    """A tool_result block as the data a tool.result event carries."""
    return {"content": result_text(block), "is_error": bool(block.get("is_error"))}


def render_tool_result(conversation_id: int, tool_use_id: str, data: dict[str, Any]) -> str:
    """The result section of a tool card (id `tool-result-<tool_use_id>`)."""
    return render_to_string(
        "skills_app/chat/_tool_result.html",
        {"tool_use_id": tool_use_id, "r": tool_result_context(conversation_id, data)},
    )


def render_approval(approval: Approval) -> str:
    """The `_approval.html` partial (id `approval-<id>`), pending or answered."""
    return render_to_string(
        "skills_app/chat/_approval.html",
        {
            "a": approval,
            "arguments": json.dumps(approval.input, indent=2, ensure_ascii=False),
            "is_skill": approval.tool == "Skill",
            "skill_name": approval.input.get("skill", "") if approval.tool == "Skill" else "",
            "skill_args": approval.input.get("args", "") if approval.tool == "Skill" else "",
        },
    )


def render_notice(text: str, *, kind: str = "error", retry: bool = True) -> str:
    """A transient error or notice row (not stored), e.g. a rate limit hit."""
    return render_to_string(
        "skills_app/chat/_notice.html", {"text": text, "kind": kind, "retry": retry}
    )
