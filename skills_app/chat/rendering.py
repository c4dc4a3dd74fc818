"""How stored rows become HTML: the transcript partials (assistant text through `markdown.py`).

The chat page and the websocket consumer both call these functions, so a message looks the same
whether it was rendered on page load or pushed live. Hidden (`is_meta`) rows are refused here
unless the viewer may inspect injected content: callers filter first, this is the second guard.

Every function renders for one visibility class (`can_inspect`). For people without the inspect
permission, the text a partial shows that is not someone's own prose (tool inputs and results,
approval prompts, a chip's error, error rows) goes through the conversation's outbound filter
(`visibility.outbound`) before it is cut or escaped: a Read of SKILL.md arrives as a placeholder,
never as text hidden by CSS. The model's and the user's own text is not rewritten.

Size: no fragment grows without bound, so a websocket frame stays under the limit and a
conversation always resumes. Tool results and inputs are cut at SHOWN_CHARS with a link to the
full text (served by `chat.views.tool_text`, filtered the same way), file lists at
SHOWN_ARTIFACTS, and a row whose HTML still exceeds FRAGMENT_MAX_BYTES is rendered again with
every card cut short (MIN_SHOWN_CHARS), then replaced by a notice.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import escape

from skills_app.chat import approval_words, denials, turns
from skills_app.chat.feedback import rateable
from skills_app.chat.markdown import markdown_html
from skills_app.chat.presenters import HiddenContentError, tool_summary
from skills_app.chat.tool_cards import (
    MIN_SHOWN_CHARS,
    SHOWN_CHARS,
    chip_state,
    cut_text,
    full_text_url,
    is_stopped_result,
    render_skill_call,
    render_tool_result,
    result_from_block,
    tool_result_context,
)
from skills_app.chat.usage import answer_usage
from skills_app.core.attachments import human_size
from skills_app.core.transcript import (
    parse_status_message,
    result_text,
    text_of,
)
from skills_app.mcp.definitions import approval_terms
from skills_app.models import Approval, Message
from skills_app.models.feedback import NOTE_MAX_CHARS
from skills_app.visibility import Outbound, outbound

# Re-exported: callers reach an answer's Markdown and the tool cards through this module.
__all__ = [
    "FRAGMENT_MAX_BYTES",
    "SHOWN_CHARS",
    "is_stopped_result",
    "markdown_html",
    "render_approval",
    "render_message",
    "render_notice",
    "render_skill_call",
    "render_tool_result",
    "result_from_block",
    "tool_result_context",
]

# Assistant rows whose blocks are rendered as text and tool cards.
ASSISTANT_CONTENT_KINDS = frozenset({"text", "tool_use"})

# The most a rendered fragment may cost inside a JSON frame (escapes included). The websocket
# server refuses frames over 1 MiB; a frame carries one fragment and a little data.
FRAGMENT_MAX_BYTES = 512 * 1024


# The key of a memo in a render's `ctx`: text -> its markdown HTML. A stored answer is rendered
# once per visibility class, and the model's prose is the same for both (never rewritten), so
# its markdown (most of the cost of a long answer) is rendered once (`chat.relay`).
MARKDOWN_MEMO = "markdown_memo"


def _markdown(text: str, ctx: dict[str, Any]) -> str:
    memo = ctx.get(MARKDOWN_MEMO)
    if not isinstance(memo, dict):
        return markdown_html(text)
    html = memo.get(text)
    if html is None:
        html = memo[text] = markdown_html(text)
    return str(html)


def message_text(row: Message) -> str:
    """The text blocks of a row joined."""
    return text_of(row.content)


def _outbound_for(conversation_id: int, can_inspect: bool, ctx: dict[str, Any] | None) -> Outbound:
    """The filter in `ctx` (built once per page or batch) when it fits, else a new one."""
    found = (ctx or {}).get("outbound")
    if (
        isinstance(found, Outbound)
        and found.can_inspect == can_inspect
        and found.conversation_id == conversation_id
    ):
        return found
    return outbound(conversation_id, can_inspect=can_inspect)


def render_message(row: Message, *, can_inspect: bool, ctx: dict[str, Any] | None = None) -> str:
    """The `_message.html` partial for one row (id `message-<id>`), for one visibility class."""
    if row.is_meta and not can_inspect:
        raise HiddenContentError(f"message {row.pk} is hidden")
    out = _outbound_for(row.conversation_id, can_inspect, ctx)
    html = _render_message(row, can_inspect, ctx or {}, out, SHOWN_CHARS)
    if _frame_cost(html) > FRAGMENT_MAX_BYTES:
        # Many tool cards in one answer: show each cut short (the full texts stay one click away).
        html = _render_message(row, can_inspect, ctx or {}, out, MIN_SHOWN_CHARS)
    if _frame_cost(html) > FRAGMENT_MAX_BYTES:
        html = render_to_string(
            "skills_app/chat/_oversized.html",
            {"m": row, "export_url": reverse("conversation-export", args=[row.conversation_id])},
        )
    return html


def _frame_cost(html: str) -> int:
    """Bytes the fragment takes inside a JSON frame (the consumer sends ASCII-escaped JSON)."""
    return len(json.dumps(html))


def _render_message(
    row: Message, can_inspect: bool, ctx: dict[str, Any], out: Outbound, shown: int
) -> str:
    context: dict[str, Any] = {
        "m": row,
        "can_inspect": can_inspect,
        "conversation_id": row.conversation_id,
        "is_demo": bool(row.run and row.run.is_demo) if row.run_id else False,
        # Only inspectors learn that an answer quoted hidden text (the audit's mark).
        "quoted_hidden": can_inspect and bool(row.meta.get("quoted_hidden")),
        # A shared link (`chat.shares`): no edit, regenerate or download controls.
        "read_only": bool(ctx.get("read_only")),
    }
    if row.kind == "skill_status":
        status = parse_status_message(message_text(row)) or {
            "name": row.meta.get("skill", "?"),
            "args": row.meta.get("args", ""),
        }
        # The arguments are part of the visible status message by design (and are inside the
        # injected text, which would withhold a person's own words from them).
        context.update(skill=status["name"], args=status["args"], state="loaded")
        if row.invocation_id and row.invocation is not None:
            context["state"] = chip_state(row.invocation)
    elif row.kind in {"skill_prompt", "permissions"} or row.is_meta:
        # The tool-result profile carries the body in a tool_result block.
        context["hidden_text"] = message_text(row) or "\n".join(
            result_text(b) for b in row.content if b.get("type") == "tool_result"
        )
    elif row.role == "assistant" and row.kind in ASSISTANT_CONTENT_KINDS:
        context["parts"] = _assistant_parts(row, ctx, out, shown)
        # One footer per answer: under the last row of its turn, with the turn's cost.
        as_stored = bool(ctx.get(turns.AS_STORED))
        context["turn"] = turns.turn_key(row) if turns.in_turn(row) and not as_stored else ""
        if as_stored or not turns.in_turn(row):
            # The audit, and a subagent's rows (beside the thread): each row with the figures
            # of its own model call.
            context["ends_turn"] = ends = turns.in_turn(row)
            context["usage"] = answer_usage(row)
        else:
            context["ends_turn"] = ends = turns.ends_turn(row, ctx)
            context["usage"] = turns.turn_usage(row) if ends else None
        if ends and rateable(row):
            # The owner's rating, when the page looked it up (a new answer has none yet).
            context.update(
                rateable=True, given=ctx.get("feedback", {}).get(row.pk), note_max=NOTE_MAX_CHARS
            )
    elif row.kind == "attachments":
        context["attachments"] = attachment_chips(row)
    elif row.kind in {"error", "notice"}:
        roots = approval_words.workspace_roots(row.conversation_id)
        context["text"] = approval_words.relative(denials.plain(out.text(message_text(row))), roots)
        context["code"] = row.meta.get("code", "")
        # One Retry, on the latest failed turn (the page says which); a live push is the latest.
        retry_id = ctx.get("retry_id", row.pk if row.meta.get("retry") else None)
        context["retry"] = retry_id == row.pk
        context["offer_summary"] = bool(row.meta.get("offer_new_conversation"))
    else:
        context["text"] = message_text(row)
    # Versions of a regenerated answer: the chat's; a shared link and the audit show every row.
    shown_whole = context["read_only"] or ctx.get(turns.AS_STORED)
    version = None if shown_whole else turns.version_of(row, ctx)
    context["version"] = version
    html: str = render_to_string("skills_app/chat/_message.html", context)
    if version is not None:
        html = _in_version(html, version)
    meta = row.meta if isinstance(row.meta, dict) else {}
    subagent = meta.get("subagent_run")
    if subagent:
        # Rows of a forked skill's subagent sit in a nested, labelled block.
        label = escape(f'Subagent of the "{meta.get("subagent_skill", "")}" skill')
        html = (
            f'<div class="subagent" data-subagent-run="{int(subagent)}" data-label="{label}">'
            f"{html}</div>"
        )
    elif meta.get("imported_subagent"):
        # An imported Claude Code subagent (sidechain) record: beside the thread, never sent.
        number = int(meta["imported_subagent"])
        label = escape(f"Subagent {number} (imported)")
        html = (
            f'<div class="subagent" data-subagent-record="{number}" data-label="{label}">'
            f"{html}</div>"
        )
    return html


_ROW_START = re.compile(r'^<div class="(row[^"]*)"')


def _in_version(html: str, version: turns.Version) -> str:
    """A row of one version of a regenerated answer: marked with it, hidden unless the newest
    (the versions control on each version's footer shows another, `static/skillscope/chat.js`)."""
    hidden = "" if version.newest else " version-hidden"
    return _ROW_START.sub(
        lambda m: (
            f'<div class="{m.group(1)}{hidden}" data-answer="{version.answer}"'
            f' data-version="{version.number}"'
        ),
        html,
        count=1,
    )


def attachment_chips(row: Message) -> list[dict[str, Any]]:
    """The files of an attachments row, with their download links (owner-only views)."""
    chips = []
    for info in row.meta.get("attachments", []) if isinstance(row.meta, dict) else []:
        chips.append(
            {
                **info,
                "size_text": human_size(int(info.get("size", 0))),
                "url": reverse("conversation-attachment", args=[row.conversation_id, info["id"]]),
            }
        )
    return chips


def _assistant_parts(
    row: Message, ctx: dict[str, Any], out: Outbound, shown: int
) -> list[dict[str, Any]]:
    """Text and tool-call parts of one assistant row, consecutive tool calls grouped together."""
    parts: list[dict[str, Any]] = []
    results: dict[str, dict[str, Any]] = ctx.get("results", {})
    invocations: dict[str, Any] = ctx.get("invocations", {})
    delivered: set[str] = ctx.get("delivered", set())
    roots = approval_words.workspace_roots(row.conversation_id)
    for block in row.content:
        kind = block.get("type")
        if kind == "thinking" and block.get("thinking"):
            # The model's own (summarized) reasoning: visible to the user, collapsed.
            thinking = approval_words.relative(block["thinking"], roots)
            parts.append({"kind": "thinking", "html": _markdown(thinking, ctx)})
        elif kind == "redacted_thinking":
            parts.append({"kind": "thinking", "redacted": True})
        elif kind == "text" and block.get("text"):
            # The model's own prose: never rewritten (an answer quoting hidden text is marked),
            # but for the server's folder: the person reads workspace paths ("out/a.json") as
            # on the tool cards; the stored row and what the model is sent keep it whole.
            text = approval_words.relative(block["text"], roots)
            parts.append({"kind": "text", "html": _markdown(text, ctx)})
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
                            chip_state(invocations.get(block["id"]), results.get(block["id"])),
                            getattr(invocations.get(block["id"]), "error", ""),
                            out=out,
                        ),
                    }
                )
                continue
            name = block.get("name", "?")
            shown_input = out.call_input(name, tool_input)
            summary = tool_summary(name, shown_input if isinstance(shown_input, dict) else {})
            # Paths as the person finds them: relative to the conversation's workspace.
            summary = approval_words.relative(summary, roots)
            arguments, cut = cut_text(
                approval_words.relative(
                    json.dumps(shown_input, indent=2, ensure_ascii=False), roots
                ),
                shown,
            )
            result = results.get(block["id"])
            card = {
                "id": block["id"],
                "name": name,
                "summary": summary.removeprefix(f"{name}:").strip(),
                "arguments": arguments,
                "arguments_url": full_text_url(row.conversation_id, block["id"], "input")
                if cut
                else "",
                "result": (
                    tool_result_context(
                        row.conversation_id, result, out=out, shown=shown, tool_use_id=block["id"]
                    )
                    if result
                    else None
                ),
            }
            if parts and parts[-1]["kind"] == "tools":
                parts[-1]["cards"].append(card)
            else:
                parts.append({"kind": "tools", "cards": [card]})
    return parts


def render_approval(approval: Approval, *, can_inspect: bool) -> str:
    """The `_approval.html` partial (id `approval-<id>`), pending or answered, for one class.

    The action is said in words with workspace-relative paths (`chat.approval_words`); the call
    (a command, a file's content to write) may quote hidden text: for people without the
    inspect permission it is filtered like a tool result. They approve what they can see.
    """
    out = outbound(approval.conversation_id, can_inspect=can_inspect)
    roots = approval_words.workspace_roots(approval.conversation_id)
    # Every part of the prompt is built from the filtered input: a model can paste injected
    # text into any field (a Grep's path lands in the action line, not in the call shown).
    shown_input = out.call_input(approval.tool, approval.input)
    action = approval_words.describe_action(approval.tool, shown_input, roots)
    arguments, cut = cut_text(approval_words.arguments_text(shown_input, roots), SHOWN_CHARS)
    reason = approval_words.relative(out.text(approval.reason), roots)
    # An MCP call says which server and tool, and what a reviewer approved it as doing: its
    # description passes the viewer's filter like a tool result (a server wrote it).
    terms = approval_terms(approval.tool)
    mcp = None
    if terms is not None:
        mcp = {
            "server": terms.server,
            "server_label": terms.server_label,
            "tool": terms.tool,
            "description": out.text(terms.description),
            "hints": terms.hints,
            "attested_by": terms.attested_by,
        }
    return render_to_string(
        "skills_app/chat/_approval.html",
        {
            "a": approval,
            "mcp": mcp,
            "action": action,
            "subject": cut_text(out.text(action.subject), SHOWN_CHARS)[0],
            "why": out.text(approval_words.why_text(approval, roots)),
            "reason": reason,
            "show_reason": bool(reason) and reason != approval.rule_text,
            "arguments": arguments,
            "arguments_cut": cut,
        },
    )


def render_elicitation(conversation_id: int, data: dict[str, Any], *, can_inspect: bool) -> str:
    """The `_elicitation.html` partial (id `elicitation-<id>`): a server's question with its form
    while pending, its outcome after. What the server wrote (its message, the fields' words)
    passes the viewer's filter like a tool result: a server may quote hidden text."""
    out = outbound(conversation_id, can_inspect=can_inspect)
    fields = [
        {
            **field,
            "title": out.text(str(field.get("title") or "")),
            "description": out.text(str(field.get("description") or "")),
        }
        for field in data.get("fields") or ()
        if isinstance(field, dict)
    ]
    shown = {
        "id": data.get("elicitation_id"),
        "server": data.get("server", ""),
        "message": out.text(str(data.get("message") or "")),
        "fields": fields,
        "status": data.get("status", ""),
        "why": data.get("why", ""),
    }
    return render_to_string(
        "skills_app/chat/_elicitation.html", {"e": shown, "conversation_id": conversation_id}
    )


def render_notice(
    text: str, *, kind: str = "error", retry: bool = True, out: Outbound | None = None
) -> str:
    """A transient error or notice row (not stored), e.g. a rate limit hit.

    `out`: the viewer's filter when the text may quote a conversation's content.
    """
    if out is not None:
        text = out.text(text)
    return render_to_string(
        "skills_app/chat/_notice.html", {"text": text, "kind": kind, "retry": retry}
    )
