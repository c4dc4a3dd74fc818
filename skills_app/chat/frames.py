"""The chat websocket's frames, server to browser: every frame is one JSON object.

`{"type", ...}`: `type` says what it is. A stored event's frame is `{"type": EVENT_TYPE, "seq",
"data", "html"}`: the tab keeps `seq` and resumes after it on a reconnect; `data` holds the
event's ids and states that `chat.event_views` announces for its type (a message's id, role and
kind, an approval's id and answer, a run's id and status), never text or names; `html` holds
htmx out-of-band fragments (rendered for this tab's viewer) that chat.js hands to htmx's
websocket extension to swap. The answer to a resume is `{"type": "resumed", "last_seq",
"html"}`: everything up to `last_seq` was sent (the connection line clears). Streamed text is
`{"type": "text.delta" | "thinking.delta", "run", "call", "index", "offset", "text"}`, appended
as text, never as HTML; offset 0 starts (or restarts, after a reconnect) the block.
`block.start` ("Calling X…") carries `html`; `info` (the connection line) and `error` (a refused
action's notice) carry `html` and the `message` it shows (the same words, as text), `error` also
whether it offers Retry (`retry`). An action the tab sent with an `action_id` is acknowledged with
`{"type": "action.ack", "action_id"}` once it was taken or refused (`chat.receipts`).
"""

from __future__ import annotations

import json
from typing import Any

from django.template.loader import render_to_string
from django.utils.html import escape


def _frame(**fields: Any) -> str:
    return json.dumps(fields, ensure_ascii=False)


def stored(seq: int, event_type: str, data: dict[str, Any], html: str) -> str:
    """A stored event's frame: its seq, type, announced fields and fragments for this tab."""
    return _frame(type=event_type, seq=int(seq), data=data, html=html)


def text(kind: str, run_id: int, call: int, index: int, offset: int, piece: str) -> str:
    """Streamed text (kind: text | thinking) for block `index` of a run's model call."""
    return _frame(
        type=f"{kind}.delta", run=run_id, call=call, index=index, offset=offset, text=piece
    )


def calling(run_id: int, call: int, index: int, tool_name: str) -> str:
    """A tool call's input is streaming: "Calling X…" in the live area until its row lands."""
    html = (
        '<div hx-swap-oob="beforeend:#live">'
        f'<div class="row row-assistant live live-tool" id="live-{int(run_id)}-{int(call)}-{int(index)}">'
        f'<div class="bubble assistant"><div class="live-text">Calling {escape(tool_name)}…</div>'
        "</div></div></div>"
    )
    return _frame(type="block.start", html=html)


def acknowledged(action_id: str) -> str:
    """The action the tab sent with this id was taken (or refused): it stops showing it pending."""
    return _frame(type="action.ack", action_id=action_id)


def resumed(seq: int) -> str:
    """The answer to a resume: everything up to `seq` was sent; the connection line clears."""
    return _frame(type="resumed", last_seq=int(seq), html=connection_line(""))


def status(message: str) -> str:
    """The connection line under the transcript says `message` (what an action did)."""
    return _frame(type="info", message=message, html=connection_line(message))


def connection_line(message: str) -> str:
    return (
        '<p id="connection" class="connection muted" role="status" aria-live="polite" '
        f'hx-swap-oob="true">{escape(message)}</p>'
    )


def error(message: str, *, retry: bool, conversation_id: int) -> str:
    """A refused action: a notice at the end of the transcript, with Retry when it may help."""
    notice = render_to_string(
        "skills_app/chat/_notice.html",
        {"text": message, "kind": "error", "retry": retry, "conversation_id": conversation_id},
    )
    html = f'<div hx-swap-oob="beforeend:#transcript">{notice}</div>'
    return _frame(type="error", message=message, retry=retry, html=html)
