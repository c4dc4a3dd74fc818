"""Page helpers for the browser tests: log in, open a chat, send, watch websocket frames, screenshots."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import Locator, Page, WebSocket, expect

from tests.support.frames import parse

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
DOCS_SCREENSHOTS = REPO / "docs" / "screenshots"
# The pictures in docs/ are PNG files, rewritten only when asked
# (`SKILLSCOPE_DOC_SCREENSHOTS=1 ./scripts/test.sh tests/browser`): Chromium spends about a second
# of CPU encoding a full-page PNG and next to nothing on a JPEG (test_chat_everyday.py, 2026-12-06:
# 88 s of CPU with PNGs, 62 s with JPEGs, 65 s with none), and a test run leaves the tree clean.
DOC_SCREENSHOTS_ASKED = os.environ.get("SKILLSCOPE_DOC_SCREENSHOTS", "") not in ("", "0")


def login(page: Page, base_url: str, username: str, password: str) -> None:
    """Log in through the login form and wait for the conversation list."""
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    # Signing in lands on a conversation ready for a message (issue 29).
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()


def screenshot(page: Page, name: str, *, full_page: bool = True) -> Path:
    """Save a JPEG of the page under test-artifacts/screenshots/ and return its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.jpg"
    page.screenshot(path=str(path), full_page=full_page, type="jpeg", quality=85)
    return path


def doc_screenshot(
    page: Page, name: str, *, doc: Path | None = None, full_page: bool = True
) -> Path:
    """A screenshot under test-artifacts/, and when asked a PNG of it in docs/ (`doc`, by default
    docs/screenshots/NAME.png). Returns the artifact's path."""
    path = screenshot(page, name, full_page=full_page)
    if DOC_SCREENSHOTS_ASKED:
        doc = doc or DOCS_SCREENSHOTS / f"{name}.png"
        doc.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(doc), full_page=full_page)
    return path


class ChatPage:
    """One tab on the chat page, recording every websocket frame it receives."""

    def __init__(self, page: Page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.frames: list[str] = []
        # Script errors and htmx's own complaints (a swap without a target) land here.
        self.errors: list[str] = []
        page.on("websocket", self._on_socket)
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def _on_socket(self, socket: WebSocket) -> None:
        socket.on("framereceived", self._on_frame)

    def _on_frame(self, payload: str | bytes) -> None:
        self.frames.append(
            payload if isinstance(payload, str) else payload.decode("utf-8", "replace")
        )

    # -- frames ----------------------------------------------------------------------------

    def parsed_frames(self) -> list[dict[str, Any]]:
        """The frames received so far, parsed (`tests.support.frames.parse`)."""
        return [parse(raw) for raw in list(self.frames)]

    def resumed_count(self) -> int:
        return sum(1 for f in self.parsed_frames() if f.get("type") == "resumed")

    def wait_until(self, predicate: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
        """Poll predicate while letting Playwright deliver events; fail with `what` on timeout."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"Timed out after {timeout} s waiting for {what}")
            self.page.wait_for_timeout(25)

    # -- navigation ------------------------------------------------------------------------

    def _after_navigation(self, before: int) -> None:
        # Sending before the socket has resumed would only show "Not connected yet".
        self.wait_until(lambda: self.resumed_count() > before, "the websocket to resume")

    def new_conversation(self) -> int:
        """Create a conversation from the list page, open it and wait for the live socket."""
        self.page.goto(f"{self.base_url}/")
        before = self.resumed_count()
        self.page.get_by_role("button", name="New conversation").click()
        self.page.wait_for_url(re.compile(r"/c/\d+/$"))
        self._after_navigation(before)
        return self.conversation_id

    def open(self, conversation_id: int) -> None:
        """Open an existing conversation and wait for the live socket."""
        before = self.resumed_count()
        self.page.goto(f"{self.base_url}/c/{conversation_id}/")
        self._after_navigation(before)

    def reload(self) -> None:
        """Reload the page and wait for the new socket to resume."""
        before = self.resumed_count()
        self.page.reload()
        self._after_navigation(before)

    @property
    def conversation_id(self) -> int:
        match = re.search(r"/c/(\d+)/", self.page.url)
        assert match, f"not on a chat page: {self.page.url}"
        return int(match.group(1))

    # -- the chat ------------------------------------------------------------------------

    @property
    def transcript(self) -> Locator:
        return self.page.get_by_role("log", name="Transcript")

    @property
    def message_box(self) -> Locator:
        return self.page.get_by_role("textbox", name="Message")

    @property
    def live(self) -> Locator:
        """The answers being written (below the transcript until their rows land)."""
        return self.page.locator("#live .live")

    @property
    def live_text(self) -> Locator:
        return self.live.locator(".live-text")

    def send(self, text: str) -> None:
        """Type a message and press Send."""
        self.message_box.fill(text)
        self.page.get_by_role("button", name="Send").click()
        expect(self.message_box).to_have_value("")

    def chip(self, skill: str) -> Locator:
        return self.transcript.locator(f'.chip[data-skill="{skill}"]')

    def approval(self) -> Locator:
        """The approval card, pending (a group with buttons) or answered (a one-line note)."""
        return self.transcript.locator(".approval")

    def wait_run_finished(self, count: int = 1, timeout: float = 10.0) -> None:
        """Wait until `count` run.finished frames arrived on this tab."""
        self.wait_until(
            lambda: (
                sum(1 for f in self.parsed_frames() if f.get("type") == "run.finished") >= count
            ),
            f"{count} finished run(s)",
            timeout=timeout,
        )
