"""Tool cards: a tool call's result (filtered for the viewer, then cut, with a link to the full
text), a model's Skill call chip, and what a call the run closed without running it shows.

Rendered for one visibility class, like every partial of `rendering.py`, which lays the cards
out in an answer.
"""

from __future__ import annotations

from typing import Any

from django.template.loader import render_to_string
from django.urls import reverse

from skills_app.chat import approval_words, denials
from skills_app.core.transcript import (
    INTERRUPTED_RESULT,
    LIVE_RESULT_CHARS,
    STOPPED_RESULT,
    result_text,
)
from skills_app.visibility import Outbound, outbound

# The recorder's live cut: a live result of this length may have been cut already, so it gets
# the link to the full text too.
SHOWN_CHARS = LIVE_RESULT_CHARS
MIN_SHOWN_CHARS = 200
SHOWN_ARTIFACTS = 50
# What the person reads for a call the run closed without running it (the model reads the
# stored text, which also tells it what to do next).
CLOSED_RESULTS = {
    STOPPED_RESULT: ("stopped", "Stopped before it finished."),
    INTERRUPTED_RESULT: ("interrupted", "Interrupted: the run ended before this call finished."),
}


def is_stopped_result(block: dict[str, Any]) -> bool:
    """A tool_result a stop wrote for a call it closed."""
    return result_text(block) == STOPPED_RESULT


def chip_state(invocation: Any, result: dict[str, Any] | None = None) -> str:
    """loaded / failed / denied for an invocation row; without one, stopped or interrupted when
    the run closed the call (`result`), else loading."""
    if invocation is None:
        closed = CLOSED_RESULTS.get(str((result or {}).get("content", "")))
        return closed[0] if closed else "loading"
    return {"allowed": "loaded", "denied": "denied"}.get(invocation.decision, "failed")


def cut_text(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to `limit` characters, and whether it was (at least this long: maybe cut live)."""
    if len(text) < limit:
        return text, False
    return text[:limit], True


def full_text_url(conversation_id: int, tool_use_id: str, part: str) -> str:
    """Where the whole of a cut text is served (`chat.views.tool_text`, filtered the same way)."""
    return reverse("conversation-tool-text", args=[conversation_id, tool_use_id, part])


def render_skill_call(
    tool_use_id: str,
    name: str,
    args: str,
    state: str,
    error: str = "",
    *,
    out: Outbound | None = None,
) -> str:
    """The chip (id `skill-<tool_use_id>`) for a model's Skill call before or instead of its status row.

    `out` filters the error for the viewer (None: text of no conversation). The arguments are
    visible by design, like the status message's `<command-args>`.
    """
    if out is not None:
        error = out.text(error)
    error = denials.plain(error)
    return render_to_string(
        "skills_app/chat/_skill_call.html",
        {"tool_use_id": tool_use_id, "skill": name, "args": args, "state": state, "error": error},
    )


_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")


def tool_result_context(
    conversation_id: int,
    data: dict[str, Any],
    *,
    out: Outbound,
    shown: int = SHOWN_CHARS,
    tool_use_id: str = "",
) -> dict[str, Any]:
    """Template facts for a tool result from a `tool.result` event or a tool_result block.

    Filtered for the viewer first, then cut (cutting first could leave a hidden span's tail).
    """
    paths = [
        path
        for path in data.get("artifacts") or []
        if isinstance(path, str) and path.startswith("out/")
    ]
    artifacts = [
        {
            "path": path,
            "name": path.rsplit("/", 1)[-1],
            # Shown in the card as the image itself (an MCP result's image, a chart written).
            "image": path.lower().endswith(_IMAGE_SUFFIXES),
        }
        for path in paths[:SHOWN_ARTIFACTS]
    ]
    tool_use_id = tool_use_id or str(data.get("tool_use_id") or "")
    # A result with images (an MCP tool's) holds content blocks: the card shows their text.
    data = {**data, "content": result_text(data)}
    closed = CLOSED_RESULTS.get(str(data.get("content", "")))
    if closed is not None:
        data = {**data, "content": closed[1]}
    # Filtered first, then the workspace root cut (no server path reaches the chat), then cut.
    roots = approval_words.workspace_roots(conversation_id)
    shown_text = denials.plain(out.text(str(data.get("content", ""))))
    content, cut = cut_text(approval_words.relative(shown_text, roots), shown)
    return {
        "conversation_id": conversation_id,
        "content": content,
        "full_url": full_text_url(conversation_id, tool_use_id, "result")
        if cut and tool_use_id
        else "",
        "is_error": bool(data.get("is_error")),
        "closed": closed[0] if closed else "",
        "artifacts": artifacts,
        "more_artifacts": len(paths) - len(artifacts),
        "files_url": (
            full_text_url(conversation_id, tool_use_id, "files")
            if len(paths) > len(artifacts) and tool_use_id
            else ""
        ),
        "decision": data.get("decision") or "",
        "reason": denials.plain(
            approval_words.relative(out.text(str(data.get("reason") or "")), roots)
        ),
    }


def result_from_block(block: dict[str, Any]) -> dict[str, Any]:
    """A tool_result block as the data a tool.result event carries."""
    return {
        "content": result_text(block),
        "is_error": bool(block.get("is_error")),
        "tool_use_id": block.get("tool_use_id", ""),
    }


def render_tool_result(
    conversation_id: int, tool_use_id: str, data: dict[str, Any], *, can_inspect: bool
) -> str:
    """The result section of a tool card (id `tool-result-<tool_use_id>`), for one visibility class."""
    out = outbound(conversation_id, can_inspect=can_inspect)
    return render_to_string(
        "skills_app/chat/_tool_result.html",
        {
            "tool_use_id": tool_use_id,
            "r": tool_result_context(conversation_id, data, out=out, tool_use_id=tool_use_id),
        },
    )
