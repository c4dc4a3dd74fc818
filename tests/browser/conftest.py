"""Fixtures for the browser tests: the fake model, the live daphne server, Chromium and tabs.

One daphne process serves every test (package scope) and talks to one FakeAnthropic running in
this process; each test gets the fake with an empty script (`model`) and its own conversations,
so tests do not depend on each other's state.

Package scope, not session: Playwright's sync API keeps its event loop registered as running
in this thread, which breaks the async tests that run after this package unless it is stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Playwright, expect, sync_playwright

from tests.browser.live_server import (
    USERS,
    LiveServer,
    LiveServerConfig,
    migrated_template,
    worker_suffix,
)
from tests.browser.pages import REPO, ChatPage, login
from tests.support.fake_anthropic import FakeAnthropic, ReceivedRequest, Reply
from tests.support.mcp_toy import toy_http_server

# Debian's build of Chromium's headless shell (the engine without the browser's windowing layer,
# what Playwright itself runs headless): a third of the full browser's CPU for the same pages
# (test_chat_everyday.py, 2026-12-07 on a loaded 2-core machine: 25 s of Chromium CPU against 64).
CHROMIUM = "/usr/bin/chromium-headless-shell"


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

# Unique text in the bodies of the test skills: it reaches the model, never a non-staff browser.
PROBE_MARKER = "PROBE-BODY-5e1d7a"
SLASH_MARKER = "SLASH-BODY-93b04c"
HELPER_MARKER = "HELPER-BODY-c8f2d6"
BASE_DIR_LINE = "Base directory for this skill"

SKILLS = {
    "browser-probe": (
        "---\n"
        "name: browser-probe\n"
        "description: Summarises a version's changes in one line for the browser tests.\n"
        'argument-hint: "[version]"\n'
        "---\n\n"
        "# Probe\n\n"
        f"{PROBE_MARKER}: write one line about version $ARGUMENTS.\n"
    ),
    "browser-slash": (
        "---\n"
        "name: browser-slash\n"
        "description: Drafts a short status note on a topic; only people start it.\n"
        'argument-hint: "[topic]"\n'
        "disable-model-invocation: true\n"
        "---\n\n"
        "# Status note\n\n"
        f"{SLASH_MARKER}: draft a three-line status note about $ARGUMENTS.\n"
    ),
    "browser-ask": (
        "---\n"
        "name: browser-ask\n"
        "description: Checks a draft against the house style; an admin rule asks before it loads.\n"
        "---\n\n"
        "# House style\n\n"
        "ASK-BODY-4d17e0: check the draft for the house style.\n"
    ),
    "browser-helper": (
        "---\n"
        "name: browser-helper\n"
        "description: Background knowledge the model may load; not offered in the slash menu.\n"
        "user-invocable: false\n"
        "---\n\n"
        f"{HELPER_MARKER}: background notes.\n"
    ),
}


@pytest.fixture(scope="package")
def fake_server() -> Iterator[FakeAnthropic]:
    """The fake Anthropic API the live server streams from, for the whole session."""
    server = FakeAnthropic()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="package")
def browser_skills_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SKILLS_DIRS folder with the test skills."""
    root = tmp_path_factory.mktemp("browser-skills")
    for name, text in SKILLS.items():
        (root / name).mkdir()
        (root / name / "SKILL.md").write_text(text)
    return root


@pytest.fixture(scope="package")
def chat_server(
    tmp_path_factory: pytest.TempPathFactory,
    fake_server: FakeAnthropic,
    browser_skills_dir: Path,
) -> Iterator[LiveServer]:
    """daphne serving the real ASGI app on loopback, with alice and audrey and skill rules."""
    server = LiveServer(
        LiveServerConfig(
            var_dir=tmp_path_factory.mktemp("browser-var"),
            skills_dir=browser_skills_dir,
            model_url=fake_server.base_url,
            log_path=REPO / "test-artifacts" / f"browser-live-server{worker_suffix()}.log",
            allowed_skills=("browser-probe", "browser-slash", "browser-helper"),
            asked_skills=("browser-ask",),
            migrated_template=migrated_template(tmp_path_factory),
        )
    )
    server.prepare()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="package")
def toy_mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The toy MCP server over Streamable HTTP, one for every MCP test of the package: each test
    registers it under its own name, and nothing the browser tests call keeps state in it."""
    with toy_http_server(tmp_path_factory.mktemp("toy-mcp")) as url:
        yield url


@pytest.fixture(scope="package")
def playwright_session() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="package")
def browser(playwright_session: Playwright) -> Iterator[Browser]:
    """Debian's Chromium headless shell."""
    # How long an expectation waits for its state: a bound, not a pause (a passing one returns at
    # once). 15 s, as a slow host (CI runs three workers, their servers and Chromium on two cores)
    # took over 5 s for a first answer while the same test took a second alone.
    expect.set_options(timeout=15_000)
    chromium = playwright_session.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield chromium
    finally:
        chromium.close()


@pytest.fixture(scope="package")
def auth_states(browser: Browser, chat_server: LiveServer) -> dict[str, Any]:
    """A logged-in storage state per user, made once through the login form."""
    states: dict[str, Any] = {}
    for username, password in USERS.items():
        context = browser.new_context()
        try:
            login(context.new_page(), chat_server.url, username, password)
            states[username] = context.storage_state()
        finally:
            context.close()
    return states


@pytest.fixture
def tab(
    browser: Browser, chat_server: LiveServer, auth_states: dict[str, Any]
) -> Iterator[Callable[..., ChatPage]]:
    """tab(user) opens a new logged-in tab; tabs of one user share a browser context."""
    contexts: dict[str, BrowserContext] = {}

    def open_tab(username: str = "alice", *, width: int = 1100, height: int = 800) -> ChatPage:
        if username not in contexts:
            contexts[username] = browser.new_context(
                storage_state=auth_states[username],
                viewport={"width": width, "height": height},
            )
        return ChatPage(contexts[username].new_page(), chat_server.url)

    try:
        yield open_tab
    finally:
        for context in contexts.values():
            context.close()


class ScriptedModel:
    """The shared fake server as one test sees it: its own script, its own requests, its pauses."""

    def __init__(self, fake: FakeAnthropic) -> None:
        self.fake = fake
        self._first_request = len(fake.requests)
        self._pauses: list[threading.Event] = []

    def enqueue(self, *replies: Reply) -> None:
        """Answer the next model requests with these replies, in order."""
        self.fake.enqueue(*replies)

    def pause(self) -> tuple[threading.Event, threading.Event]:
        """(release, reached): pass as wait_for/reached; released at teardown at the latest."""
        release, reached = threading.Event(), threading.Event()
        self._pauses.append(release)
        return release, reached

    @property
    def requests(self) -> list[ReceivedRequest]:
        """The requests the live server sent during this test."""
        return self.fake.requests[self._first_request :]

    def release_all(self) -> None:
        for release in self._pauses:
            release.set()

    def reset(self) -> None:
        # FakeAnthropic has no public "clear": a reply a failed test left queued must not
        # answer the next test's first request.
        with self.fake._lock:
            self.fake._queue.clear()
        self.fake.set_responder(None)


@pytest.fixture
def model(fake_server: FakeAnthropic, chat_server: LiveServer) -> Iterator[ScriptedModel]:
    """The fake model with an empty script for this test."""
    scripted = ScriptedModel(fake_server)
    scripted.reset()
    try:
        yield scripted
    finally:
        scripted.release_all()
        scripted.reset()
