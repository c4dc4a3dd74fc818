"""An imported session takes a next message with thinking on, whatever its file ended with.

The judge is the fake Anthropic server, which refuses what the Messages API refuses: with
thinking on, a tool turn that is continued (the last user message answers its calls) must start
with a thinking block, and an imported turn has none (its thinking, if any, was signed for
another key and is never sent).
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from skills_app.audit.transcript_io import TranscriptImportError, import_transcript
from skills_app.core.cc_thread import UNFINISHED_CALL
from skills_app.core.transcript import StoredMessage
from skills_app.models import Conversation, Message
from skills_app.runs import agent_setup, store
from tests.audit.test_claude_code_sessions import MIRROR, PUBLIC_SESSIONS
from tests.support.fake_anthropic import FakeAnthropic, Reply
from tests.support.loop_helpers import run_turn, use_fake_model
from tests.support.paths import FIXTURES

SESSIONS = FIXTURES / "claude_code"
FIXTURE_NAMES = sorted(p.name for p in SESSIONS.glob("*.jsonl"))
# One model per way of thinking: adaptive when asked, adaptive by default, always, budget_tokens.
THINKING_MODELS = ["claude-opus-4-8", "claude-sonnet-5", "claude-fable-5", "claude-haiku-4-5"]
NOTE_START = "The imported session file ends here"


def verdict(fake: FakeAnthropic, body: dict[str, Any]) -> str | None:
    """None when the fake server accepts the request body, else its error message."""
    request = urllib.request.Request(
        f"{fake.base_url}/v1/messages",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10):
            return None
    except urllib.error.HTTPError as exc:
        return str(json.loads(exc.read())["error"]["message"])


def next_request(conversation: Conversation, model: str) -> dict[str, Any]:
    """The request a new message would send, with thinking on."""
    Conversation.objects.filter(pk=conversation.pk).update(model=model, thinking=True)
    conversation.refresh_from_db()
    store.append_message(conversation.pk, StoredMessage.text("user", "Go on, please."))
    return agent_setup.build_request(conversation).as_kwargs()


def notes(conversation: Conversation) -> list[Message]:
    return list(conversation.messages.filter(kind="notice", meta__imported_closing=True))


@pytest.mark.django_db
@pytest.mark.parametrize("model", THINKING_MODELS)
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_fixture_cut_after_any_line_takes_a_next_message_with_thinking_on(
    alice, fake_anthropic, name, model
):
    fake_anthropic.set_responder(lambda request: Reply.text("ok"))
    lines = (SESSIONS / name).read_bytes().splitlines(keepends=True)
    refused, tool_ends = [], 0
    for cut in range(1, len(lines) + 1):
        try:
            result = import_transcript(alice.pk, b"".join(lines[:cut]))
        except TranscriptImportError:
            continue  # nothing usable in the first lines yet
        tool_ends += len(notes(result.conversation))
        problem = verdict(fake_anthropic, next_request(result.conversation, model))
        if problem:
            refused.append(f"cut after line {cut}: {problem}")
    assert refused == []
    # The cuts do end inside tool turns wherever the file has any (not a vacuous pass).
    assert tool_ends > 0 or b'"tool_use"' not in b"".join(lines)


@pytest.mark.skipif(
    not PUBLIC_SESSIONS,
    reason=f"no snapshots of the transcript viewers' repositories under {MIRROR}; set "
    "SKILLSCOPE_MIRROR to a folder with <owner>+<name>/repo git directories to run these",
)
@pytest.mark.django_db
@pytest.mark.parametrize(("repo", "path"), PUBLIC_SESSIONS or [("none", "none")])
def test_every_public_session_cut_inside_a_tool_turn_takes_a_next_message_with_thinking_on(
    alice, fake_anthropic, repo, path
):
    fake_anthropic.set_responder(lambda request: Reply.text("ok"))
    data = subprocess.run(
        ["git", f"--git-dir={MIRROR / repo / 'repo'}", "show", f"HEAD:{path}"],
        capture_output=True,
        timeout=60,
        check=True,
    ).stdout
    lines = data.splitlines(keepends=True)
    # Real sessions are long: cut them where a tool turn is open (after a call or a result;
    # at most about 30 such places, evenly spread), and at their end.
    open_turns = [
        n
        for n, line in enumerate(lines, start=1)
        if b'"tool_use"' in line or b'"tool_result"' in line
    ]
    cuts = [*open_turns[:: max(1, len(open_turns) // 30)], len(lines)]
    refused = []
    for model in ("claude-opus-4-8", "claude-fable-5"):
        for cut in cuts:
            try:
                result = import_transcript(alice.pk, b"".join(lines[:cut]))
            except TranscriptImportError:
                continue
            problem = verdict(fake_anthropic, next_request(result.conversation, model))
            if problem:
                refused.append(f"{model}, cut after line {cut}: {problem}")
    assert refused == []


def session_ending_in_a_call(*, answered: bool) -> bytes:
    """A Claude Code file (one line per block) whose last assistant turn called a tool."""
    base = {"sessionId": "5e55a0a1-0000-4000-8000-0000000000aa", "isSidechain": False}
    lines: list[dict[str, Any]] = [
        {
            **base,
            "type": "user",
            "uuid": "u1",
            "message": {"role": "user", "content": "Count them"},
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "message": {
                "id": "msg_01",
                "role": "assistant",
                "content": [{"type": "text", "text": "I will count the files."}],
            },
        },
        {
            **base,
            "type": "assistant",
            "uuid": "a2",
            "parentUuid": "a1",
            "message": {
                "id": "msg_01",
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "Bash",
                        "input": {"command": "ls"},
                    }
                ],
            },
        },
    ]
    if answered:
        lines.append(
            {
                **base,
                "type": "user",
                "uuid": "u2",
                "parentUuid": "a2",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "a b"}
                    ],
                },
            }
        )
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("answered", [False, True], ids=["call-unanswered", "result-unanswered"])
async def test_the_next_message_after_an_imported_tool_call_is_answered_on_the_first_try(
    settings, fake_anthropic, alice, answered
):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = []
    result = await sync_to_async(import_transcript)(
        alice.pk, session_ending_in_a_call(answered=answered)
    )
    conversation = result.conversation
    await Conversation.objects.filter(pk=conversation.pk).aupdate(thinking=True)
    fake_anthropic.enqueue(Reply.text("There are two."))

    run = await run_turn(conversation, "So how many?", alice)

    assert run.status == "done", run.error
    [sent] = fake_anthropic.requests
    assert sent.status == 200 and sent["thinking"]["type"] == "adaptive"
    text = json.dumps(sent["messages"])
    assert "So how many?" in text and "toolu_01" in text
    if not answered:
        assert UNFINISHED_CALL in text


@pytest.mark.django_db
def test_the_owner_sees_once_that_the_file_ended_inside_a_tool_turn(alice):
    result = import_transcript(alice.pk, session_ending_in_a_call(answered=False))
    [note] = notes(result.conversation)
    assert note.role == "assistant" and note.to_model and not note.is_meta
    assert (
        "1 tool call" in note.content[0]["text"]
        and "not run in this import" in (note.content[0]["text"])
    )
    client = Client()
    client.force_login(alice)
    page = client.get(reverse("conversation", args=[result.conversation.pk])).content.decode()
    assert page.count(NOTE_START) == 1
    assert "not run in this import" in page


@pytest.mark.django_db
def test_a_file_that_ends_with_an_answer_gets_no_note(alice):
    data = session_ending_in_a_call(answered=True) + (
        json.dumps(
            {
                "type": "assistant",
                "message": {"id": "msg_02", "role": "assistant", "content": "Two files."},
            }
        ).encode()
        + b"\n"
    )
    result = import_transcript(alice.pk, data)
    assert notes(result.conversation) == []
