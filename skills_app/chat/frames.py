"""The chat websocket's frames, server to browser: what they look like and how to read them.

Stored events and answers to actions are HTML for htmx's websocket extension: out-of-band
fragments it swaps into the page. A stored event's frame starts with the sequence marker
`<div id="chat-seq" data-seq=N data-event=TYPE hx-swap-oob="true">`, which replaces the page's
own: the client resumes from its `data-seq` after a reconnect. Streamed text is JSON (the client
appends it itself, as text, never as HTML): `{"type": "text.delta" | "thinking.delta", "run",
"call", "index", "offset", "text"}`; offset 0 starts (or restarts, after a reconnect) the block.
An action the tab sent with an `action_id` is acknowledged with the JSON
`{"type": "action.ack", "action_id"}` once it was taken or refused (`chat.receipts`).

`parse` reads a frame back into a dict (type, seq, html, text, and the JSON fields): for the
tests and the benchmarks, which watch the wire like a browser does.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

from django.template.loader import render_to_string
from django.utils.html import escape


def stored(seq: int, event_type: str, html: str) -> str:
    """A stored event's frame: the sequence marker, then its fragments."""
    return marker(seq, event_type) + html


def marker(seq: int, event_type: str) -> str:
    return (
        f'<div id="chat-seq" hidden hx-swap-oob="true" data-seq="{int(seq)}" '
        f'data-event="{escape(event_type)}"></div>'
    )


def text(kind: str, run_id: int, call: int, index: int, offset: int, piece: str) -> str:
    """Streamed text (kind: text | thinking) for block `index` of a run's model call."""
    return json.dumps(
        {
            "type": f"{kind}.delta",
            "run": run_id,
            "call": call,
            "index": index,
            "offset": offset,
            "text": piece,
        },
        ensure_ascii=False,
    )


def calling(run_id: int, call: int, index: int, tool_name: str) -> str:
    """A tool call's input is streaming: "Calling X…" in the live area until its row lands."""
    return (
        '<div hx-swap-oob="beforeend:#live" data-event="block.start">'
        f'<div class="row row-assistant live live-tool" id="live-{int(run_id)}-{int(call)}-{int(index)}">'
        f'<div class="bubble assistant"><div class="live-text">Calling {escape(tool_name)}…</div>'
        "</div></div></div>"
    )


def acknowledged(action_id: str) -> str:
    """The action the tab sent with this id was taken (or refused): it stops showing it pending."""
    return json.dumps({"type": "action.ack", "action_id": action_id})


def resumed(seq: int) -> str:
    """The answer to a resume: everything up to `seq` was sent; the connection line clears."""
    return marker(seq, "resumed") + status("")


def status(message: str, event_type: str = "info") -> str:
    """The connection line under the transcript says `message`."""
    return (
        f'<p id="connection" class="connection muted" role="status" aria-live="polite" '
        f'hx-swap-oob="true" data-event="{escape(event_type)}">{escape(message)}</p>'
    )


def error(message: str, *, retry: bool, conversation_id: int) -> str:
    """A refused action: a notice at the end of the transcript, with Retry when it may help."""
    notice = render_to_string(
        "skills_app/chat/_notice.html",
        {"text": message, "kind": "error", "retry": retry, "conversation_id": conversation_id},
    )
    return f'<div hx-swap-oob="beforeend:#transcript" data-event="error">{notice}</div>'


# -- reading frames (tests, benchmarks) -----------------------------------------------------------

_EVENT = re.compile(r'data-event="([^"]*)"')
_SEQ = re.compile(r'id="chat-seq"[^>]*data-seq="(\d+)"')
_RUN_STATUS = re.compile(r'data-run-status="([^"]*)"')


def parse(raw: str | bytes) -> dict[str, Any]:
    """A frame as a dict: JSON frames as they are; HTML frames as type, seq, html and text."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if raw.startswith("{"):
        parsed: dict[str, Any] = json.loads(raw)
        return parsed
    frame: dict[str, Any] = {"html": raw, "text": _Text.of(raw)}
    found = _EVENT.search(raw)
    frame["type"] = found.group(1) if found else ""
    seq = _SEQ.search(raw)
    if seq:
        frame["seq"] = int(seq.group(1))
    status = _RUN_STATUS.search(raw)
    if status:
        frame["status"] = status.group(1)
    if frame["type"] == "resumed":
        frame["last_seq"] = frame.pop("seq")
    return frame


class _Text(HTMLParser):
    """The visible text of a fragment, whitespace collapsed (a page with scripts running shows
    nothing of a `<noscript>`)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.noscript = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "noscript":
            self.noscript += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "noscript" and self.noscript:
            self.noscript -= 1

    def handle_data(self, data: str) -> None:
        if not self.noscript:
            self.parts.append(data)

    @classmethod
    def of(cls, html: str) -> str:
        reader = cls()
        reader.feed(html)
        return " ".join(" ".join(reader.parts).split())
