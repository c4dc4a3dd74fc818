"""Shared set-up for tests that drive whole runs against the fake Anthropic server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from channels.layers import get_channel_layer

from skills_app.core.demo import DemoModel
from skills_app.core.llm import ModelClient
from skills_app.models import Conversation, Message, Run
from skills_app.runs import broadcast
from skills_app.runs import supervisor as runs

SKILLS = {
    "greeter": """\
        ---
        name: greeter
        description: Greets someone by name in a friendly way.
        ---
        GREETER-BODY-MARKER: greet $ARGUMENTS warmly and mention the weather.
        """,
    "manual-only": """\
        ---
        name: manual-only
        description: Only a person may start this one.
        disable-model-invocation: true
        ---
        MANUAL-ONLY-BODY
        """,
    "model-only": """\
        ---
        name: model-only
        description: Background knowledge the model loads itself.
        user-invocable: false
        ---
        MODEL-ONLY-BODY
        """,
    "echoer": """\
        ---
        name: echoer
        description: Echoes things with the shell.
        allowed-tools: Bash(echo *)
        ---
        Run `echo` with the user's words.
        """,
    "switcher": """\
        ---
        name: switcher
        description: Needs a different model.
        model: claude-haiku-4-5
        ---
        SWITCHER-BODY
        """,
}


def instant_demo_client() -> ModelClient:
    """The demo model without pauses between chunks (a MODEL_CLIENT for tests)."""
    return DemoModel(delay=0)


def write_skills(root: Path, skills: dict[str, str] | None = None) -> Path:
    for name, text in (skills or SKILLS).items():
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(textwrap.dedent(text))
    return root


def use_fake_model(settings: Any, fake: Any, *, retries: int = 2) -> None:
    """Point the real SDK adapter at the fake Anthropic server."""
    settings.ANTHROPIC_API_KEY = "sk-test-fake"
    settings.ANTHROPIC_BASE_URL = fake.base_url
    settings.ANTHROPIC_MAX_RETRIES = retries
    # The model's own default (the test model does not think unless asked); thinking has its
    # own tests, which turn it on.
    settings.ANTHROPIC_THINKING = None


async def wait_until(condition: Any, *, timeout: float = 10.0, what: str = "the condition") -> None:
    """Poll an async predicate until it holds: waiting on the event itself, never a fixed sleep."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        if asyncio.get_running_loop().time() >= deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        await asyncio.sleep(0.02)


async def run_turn(
    conversation: Conversation, text: str | None, user: Any, *, answer: str | None = None
) -> Run:
    run = await runs.start_run(conversation.pk, text, user_id=user.pk, auto_answer=answer)
    await runs.wait_for_run(run.pk, timeout=30)
    return await Run.objects.aget(pk=run.pk)


def rows(conversation: Conversation) -> list[Message]:
    return list(Message.objects.filter(conversation=conversation).order_by("seq"))


def accepted(fake: Any) -> list[dict[str, Any]]:
    """Requests the fake server accepted (it rejects what the real API would)."""
    return [r for r in fake.requests if r.status == 200]


def count_in_request(request: dict[str, Any], needle: str) -> int:
    return json.dumps(request["messages"], ensure_ascii=False).count(needle)


WATCH_END = "watch.end"


@contextlib.asynccontextmanager
async def watch_group(conversation_id: int) -> AsyncIterator[list[dict[str, Any]]]:
    """Every channel-layer message sent to the conversation's group while inside, in order."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(broadcast.group_name(conversation_id), channel)
    seen: list[dict[str, Any]] = []
    end = asyncio.Event()

    async def collect() -> None:
        while True:
            message = await layer.receive(channel)
            if message.get("type") == WATCH_END:
                end.set()
            else:
                seen.append(message)

    task = asyncio.ensure_future(collect())
    try:
        yield seen
        # A marker sent after everything already sent: when it arrives, all of that has.
        await layer.send(channel, {"type": WATCH_END})
        await asyncio.wait_for(end.wait(), 10)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await layer.group_discard(broadcast.group_name(conversation_id), channel)
