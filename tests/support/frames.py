"""Reading the chat websocket's JSON frames (`skills_app.chat.frames`) in tests and benchmarks.

`parse` returns the frame as the browser gets it. Tests check what happened on the frame's own
fields: `type`, `seq`, a stored event's `data` (its ids and states; the row a message id names
is read from the database when its text matters), streamed text's `text` by `offset`, an `info`
or `error` frame's `message` (and `retry`). Text is never scraped out of `html`.

`html` is still read where it is the subject:
- hidden-content checks read the whole frame, html included (`repr(frames)`, the raw frame):
  what the browser receives is what must hold nothing hidden (tests/security, tests/chat);
- tests/security/test_edges.py: an error notice escapes what it echoes, and a huge tool result
  is cut into a notice with its links (the markup itself);
- tests/runs/test_events.py: a new event type's frame is the markup its registered view made;
- tests/multiprocess/bench_load.py: the stamps that reached a tab only with the stored answer
  (its live text was dropped) are in the answer's fragment: a message's text is not data.
Fragments and pages themselves are checked as markup in tests/chat/test_fragments.py and the view
tests, which render them directly.
"""

from __future__ import annotations

import json
from typing import Any


def parse(raw: str | bytes) -> dict[str, Any]:
    """A frame as a dict."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    frame: dict[str, Any] = json.loads(raw)
    return frame
