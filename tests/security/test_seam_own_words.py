"""A person's own words are never withheld from them (#25) — and never an oracle on hidden text.

The carve-out showed a person any piece of their own words (10 characters or more) found inside
a withheld span, wherever the span came from. So a chatter who sends guesses, one per line,
then reloads a tool card that showed a skill's SKILL.md as a placeholder, sees which guesses are
in the skill: a right guess is cut out of the placeholder, a wrong one is not. One message of
a hundred lines tests a hundred continuations; the file comes out a few characters per message.

What stays true: their own `/name` arguments, substituted into the injected text, are shown to
them (tests/registry/test_review_consent_runs.py); guesses about the skill's files tell them nothing.
Positive control: the model did read the file.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from skills_app.models import Conversation, PermissionRule, Run
from skills_app.visibility import forget
from tests.security.helpers import client_of
from tests.security.test_hidden_outbound import PLACEHOLDER, SKILL_MD, _skills
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import run_turn, use_fake_model

pytestmark = pytest.mark.django_db(transaction=True)

# In the ledger's SKILL.md: "...: the secret handshake is three short knocks and a long cough."
RIGHT = "the secret handshake is three short knocks"
WRONG = "the secret handshake is three quiet knocks"


def _get(client: Any, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return body.decode()


async def test_guessing_lines_of_a_skill_does_not_reveal_which_guess_is_right(
    settings, fake_anthropic, tmp_path, alice
):
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    settings.SKILLS_DIRS = [_skills(tmp_path / "skills")]
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    conversation = await Conversation.objects.acreate(owner=alice, title="ledger")
    fake_anthropic.enqueue(
        Reply.tool_use("Skill", {"skill": "ledger"}),
        Reply.tool_use("Read", {"file_path": "skills/ledger/SKILL.md"}),
        Reply.text("The ledger is tidy."),
        Reply.text("Noted."),
    )
    run = await run_turn(conversation, "tidy the ledger", alice)
    assert run.status == Run.DONE, run.error
    assert RIGHT in str(fake_anthropic.requests[2]["messages"])  # the model read the file
    # The guesses, one per line (each line counts as the person's own words).
    guesses = "\n".join(["some guesses about the ledger:", RIGHT, WRONG])
    run = await run_turn(conversation, guesses, alice)
    assert run.status == Run.DONE, run.error
    await sync_to_async(forget)(conversation.pk)
    client = await sync_to_async(client_of)(alice)
    for url in (
        reverse("conversation", args=[conversation.pk]),
        reverse("conversation-export-markdown", args=[conversation.pk]),
        reverse("conversation-export", args=[conversation.pk]),
    ):
        shown = await sync_to_async(_get)(client, url)
        assert shown.count(WRONG) >= 1, url  # the person's message is there
        # A right guess shows up exactly as often as a wrong one: once, in their message.
        assert shown.count(RIGHT) == shown.count(WRONG), (url, shown.count(RIGHT))
    page = await sync_to_async(_get)(client, reverse("conversation", args=[conversation.pk]))
    assert PLACEHOLDER in page
    assert "three short knocks and a long cough" not in page
    assert SKILL_MD  # the file the guesses are about


def test_an_injected_text_is_split_at_the_longest_own_words_it_holds():
    from skills_app.hidden import _own_splitter

    split = _own_splitter(["Ada Lovelace", "Ada Lovelace and Charles Babbage", "short", "  "])
    body = 'Greet "Ada Lovelace and Charles Babbage" warmly, then Ada Lovelace again.'
    assert split(body) == ['Greet "', '" warmly, then ', " again."]
    # Words under OWN_MIN characters cut nothing (a one-letter message would shred a skill).
    assert split("a short text with nothing of theirs") == ["a short text with nothing of theirs"]
    assert _own_splitter([])("anything at all") == ["anything at all"]
