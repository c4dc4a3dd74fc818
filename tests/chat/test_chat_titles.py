"""Titles made after the first answer, and the exports people read (Markdown beside the JSONL).

Titles are shown to ordinary users: the attack is a title model handed hidden skill text, or one
that quotes it. The positive control proves the model did get the hidden text in the run.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from skills_app.chat import titles
from skills_app.core.titles import (
    clean_title,
    command_title,
    distinct_title,
    title_from_message,
)
from skills_app.models import Conversation, ModelCall, PermissionRule
from skills_app.runs import supervisor as runs
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

MARKER = "GREETER-BODY-MARKER"
HIDDEN_SENTENCE = "GREETER-BODY-MARKER: greet Ann warmly and mention the weather."


@pytest.fixture
def conversation(alice):
    PermissionRule.objects.create(behavior="allow", rule_text="Skill(greeter)")
    return Conversation.objects.create(owner=alice)


async def title_of(conversation) -> str:
    return (await Conversation.objects.aget(pk=conversation.pk)).title


async def turn(conversation, user, text: str) -> None:
    run = await runs.start_run(conversation.pk, text, user_id=user.pk)
    await runs.wait_for_run(run.pk, timeout=30)


async def titled(conversation) -> None:
    async def done() -> bool:
        return await title_of(conversation) != "New conversation"

    await wait_until(done, what="the title")


def test_a_title_without_a_model_is_the_first_message_cut_at_a_word():
    assert title_from_message("  Plan   the\nrelease notes ") == "Plan the release notes"
    long = "Compare the quarterly revenue figures of every region and explain the outliers please"
    assert title_from_message(long) == "Compare the quarterly revenue figures of every region and…"
    assert clean_title('"**Quarterly revenue review**."\nmore') == "Quarterly revenue review"


async def test_the_title_model_gets_only_visible_text(settings, fake, conversation, alice):
    settings.CHAT_TITLE_MODEL = "claude-haiku-4-5"
    fake.enqueue(Reply.text("Hello Ann, lovely sunshine today!"), Reply.text("Greeting Ann"))
    await turn(conversation, alice, "/greeter Ann")
    await titled(conversation)

    run_request, title_request = fake.requests[-2], fake.requests[-1]
    assert MARKER in json.dumps(run_request["messages"])  # positive control: the model got it
    assert title_request["model"] == "claude-haiku-4-5"
    sent = json.dumps(title_request, ensure_ascii=False)
    assert MARKER not in sent and "Base directory" not in sent
    assert "/greeter Ann" in sent and "lovely sunshine" in sent
    assert await title_of(conversation) == "Greeting Ann"
    assert await ModelCall.objects.filter(
        conversation=conversation, purpose=ModelCall.TITLE
    ).aexists()


async def test_a_title_quoting_hidden_text_falls_back_to_the_command_in_words(
    settings, fake, conversation, alice
):
    settings.CHAT_TITLE_MODEL = "claude-haiku-4-5"
    fake.enqueue(Reply.text("Hi Ann."), Reply.text(HIDDEN_SENTENCE))
    await turn(conversation, alice, "/greeter Ann")
    await titled(conversation)
    assert await title_of(conversation) == "Greeter: Ann"


async def test_without_a_title_model_a_slash_command_is_titled_in_words(fake, conversation, alice):
    fake.enqueue(Reply.text("Hello Ann, lovely sunshine today!"))
    await turn(conversation, alice, "/greeter   in/people/ann.txt  warmly")
    await titled(conversation)
    title = await title_of(conversation)
    assert title == "Greeter: ann.txt warmly"
    assert MARKER not in title


def test_a_command_title_names_the_skill_and_the_gist_of_its_arguments():
    assert command_title(["text-stats"], "in/notes.txt") == "Text stats: notes.txt"
    assert command_title(["text-stats"], "") == "Text stats"
    assert (
        command_title(["a", "b_c"], "https://example.org/x y") == "A + b c: https://example.org/x y"
    )
    long = command_title(["summarise"], "word " * 40)
    assert len(long) <= 60 and long.endswith("…")


def test_a_title_taken_in_the_list_gets_the_next_number():
    assert distinct_title("Plan", set()) == "Plan"
    assert distinct_title("Plan", {"Plan", "Plan (2)", "Other"}) == "Plan (3)"
    assert distinct_title("Plan (2)", {"Plan", "Plan (2)"}) == "Plan (2) (2)"


async def test_titles_are_distinct_within_one_persons_list(fake, alice, bob):
    question = "Hello! What can you do? Please list your skills."
    fake.set_responder(lambda request: Reply.text("Quite a lot."))
    made = []
    for owner in (alice, alice, bob, alice):
        conversation = await Conversation.objects.acreate(owner=owner)
        await turn(conversation, owner, question)
        await titled(conversation)
        made.append(await title_of(conversation))
    base = title_from_message(question)
    assert made == [base, f"{base} (2)", base, f"{base} (3)"]


async def test_a_renamed_conversation_keeps_its_name(fake, conversation, alice):
    await Conversation.objects.filter(pk=conversation.pk).aupdate(title="Mine")
    fake.enqueue(Reply.text("An answer."))
    await turn(conversation, alice, "Some question")
    # Called here too: the run's own follow-up may not have run yet, and must not matter.
    await titles.title_after_answer(conversation.pk)
    assert await title_of(conversation) == "Mine"


async def test_the_markdown_export_shows_what_each_reader_sees(fake, conversation, alice, auditor):
    fake.enqueue(Reply.text("Hello Ann!"))
    await turn(conversation, alice, "/greeter Ann")
    owner, inspector = Client(), Client()
    await sync_to_async(owner.force_login)(alice)
    await sync_to_async(inspector.force_login)(auditor)
    url = f"/audit/conversations/{conversation.pk}/export.md"

    mine = (await sync_to_async(owner.get)(url)).content.decode()
    assert "## You (command)\n\n```\n/greeter Ann\n```" in mine
    assert "Hello Ann!" in mine and MARKER not in mine and "Hidden from the user" not in mine

    audited = (await sync_to_async(inspector.get)(url)).content.decode()
    assert "### [Hidden from the user] Injected skill instructions" in audited
    assert MARKER in audited

    # The command is in the JSONL export too, as the user's own row.
    lines = (await sync_to_async(owner.get)(url.replace(".md", ".jsonl"))).content.decode()
    commands = [json.loads(x) for x in lines.splitlines() if '"command"' in x]
    assert commands[0]["message"]["content"][0]["text"] == "/greeter Ann"


async def test_another_users_markdown_export_is_not_found(fake, conversation, bob):
    client = Client()
    await sync_to_async(client.force_login)(bob)
    url = f"/audit/conversations/{conversation.pk}/export.md"
    assert (await sync_to_async(client.get)(url)).status_code == 404
