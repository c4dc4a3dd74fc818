"""Reading the chat websocket's JSON frames (`skills_app.chat.frames`) in tests and benchmarks.

`parse` returns the frame's own fields (a stored event's ids and states are in its `data`) plus,
for a frame with `html`, the text a person sees in it (`text`: whitespace collapsed, nothing of
a `<noscript>`).
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any


def parse(raw: str | bytes) -> dict[str, Any]:
    """A frame as a dict; its visible text beside its html."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    frame: dict[str, Any] = json.loads(raw)
    html = frame.get("html")
    if isinstance(html, str):
        frame["text"] = VisibleText.of(html)
    return frame


class VisibleText(HTMLParser):
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
