"""The fake API choosing a skill the way the demo model does, from the request as sent.

`skill_chooser()` is a responder for `FakeAnthropic.set_responder`: it reads the catalog from the
wire request (the `Skill` tool's description, or the skills listed in the system prompt), picks a
skill by the documented rule of `skills_app.core.skill_choice` (a named skill, else word overlap,
at least MIN_OVERLAP words) and answers with the loader tool the request offers; otherwise with
plain text. So trigger runs go through the real SDK, streaming and usage, with known answers.

`hold` pauses the answers after the first `after` requests until the event is set (to stop a run
while it is under way); `reached` is set when the first answer waits.
"""

from __future__ import annotations

import threading
from typing import Any

from skills_app.core.skill_choice import can_load, choose_skill, loader_call, read_catalog
from tests.support.fake_anthropic import ReceivedRequest, Reply
from tests.support.fake_anthropic_replies import last_user_text

NO_SKILL_TEXT = "I can answer this directly."
# Every answer reports this many output tokens, so a test can price the answers exactly.
OUTPUT_TOKENS = 25


def choice_for(request: ReceivedRequest) -> tuple[str, dict[str, Any]] | None:
    """(tool name, input) of the skill call the rule makes for this request, or None."""
    tools = request.get("tools") or []
    catalog = read_catalog(request.system_text, tools)
    choice = choose_skill(last_user_text(request), catalog)
    if choice is None or not can_load(tools):
        return None
    return loader_call(tools, choice.entry.name, choice.args)


def skill_chooser(
    *,
    hold: threading.Event | None = None,
    after: int = 0,
    reached: threading.Event | None = None,
) -> Any:
    """A responder answering every request by the skill-choice rule (see the module docstring)."""
    lock = threading.Lock()
    answered = [0]

    def respond(request: ReceivedRequest) -> Reply:
        with lock:
            answered[0] += 1
            pause = hold is not None and answered[0] > after
        options: dict[str, Any] = {"output_tokens": OUTPUT_TOKENS}
        if pause:
            options.update(wait_for=hold, wait_after_events=1, reached=reached)
        call = choice_for(request)
        if call is None:
            return Reply.text(NO_SKILL_TEXT, **options)
        name, tool_input = call
        return Reply.tool_use(name, tool_input, text="I'll use a skill for this.", **options)

    return respond
