"""Feedback on answers (thumbs up or down, an optional note) and pinned conversations."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from skills_app.core.transcript import StoredMessage
from skills_app.models import AnswerFeedback, AuditEvent, Conversation
from skills_app.models.feedback import NOTE_MAX_CHARS
from skills_app.runs import store

pytestmark = pytest.mark.django_db


@pytest.fixture
def answered(alice):
    """Alice's conversation: a question and the model's answer."""
    conv = Conversation.objects.create(owner=alice, title="Trip plans", last_event_seq=2)
    store.append_message(conv.pk, StoredMessage.text("user", "Where should I go?"))
    answer = store.append_message(conv.pk, StoredMessage.text("assistant", "Try the coast."))
    return conv, answer


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _rate(client: Client, conv, answer, htmx: bool = False, **fields):
    headers = {"HX-Request": "true"} if htmx else {}
    return client.post(
        reverse("answer-feedback", args=[conv.pk, answer.pk]), fields, headers=headers
    )


def test_the_owner_rates_an_answer_and_a_second_rating_replaces_the_first(alice, answered):
    conv, answer = answered
    client = _client(alice)
    assert _rate(client, conv, answer, rating="down", note="Too vague").status_code == 302
    assert _rate(client, conv, answer, rating="up").status_code == 302
    # A change of rating alone keeps the note already given.
    assert list(AnswerFeedback.objects.values_list("user__username", "rating", "note")) == [
        ("alice", "up", "Too vague")
    ]
    assert _rate(client, conv, answer, rating="up", note="").status_code == 302
    assert AnswerFeedback.objects.get().note == ""
    assert _rate(client, conv, answer, rating="none").status_code == 302
    assert not AnswerFeedback.objects.exists()
    trail = AuditEvent.objects.filter(action=AuditEvent.FEEDBACK_GIVEN).order_by("pk")
    assert [e.detail["rating"] for e in trail] == ["down", "up", "up", "none"]
    assert trail[0].actor == alice and trail[0].detail["noted"] is True


def test_the_chat_page_shows_the_owners_rating_pressed_and_the_note_escaped(alice, answered):
    conv, answer = answered
    AnswerFeedback.objects.create(user=alice, message=answer, rating="down", note="<b>wrong</b>")
    page = _client(alice).get(reverse("conversation", args=[conv.pk])).content.decode()
    block = page[page.index(f'id="feedback-{answer.pk}"') :]
    block = block[: block.index("</details>")]
    assert 'aria-label="Bad answer" title="Bad answer" aria-pressed="true"' in block
    assert 'aria-label="Good answer" title="Good answer" aria-pressed="false"' in block
    assert "&lt;b&gt;wrong&lt;/b&gt;" in block and "<b>wrong" not in block
    # Pressing the pressed button again takes the rating back.
    assert 'name="rating" value="none" aria-label="Bad answer"' in block


def test_htmx_gets_the_controls_back_with_the_note_field_open(alice, answered):
    conv, answer = answered
    response = _rate(_client(alice), conv, answer, rating="down", htmx=True)
    html = response.content.decode()
    assert response.status_code == 200 and html.startswith('<div class="feedback"')
    assert '<details class="feedback-note" open>' in html and "went wrong" in html
    assert "csrfmiddlewaretoken" in html


def test_a_note_longer_than_the_cap_is_refused_with_the_reason(alice, answered):
    conv, answer = answered
    client = _client(alice)
    response = _rate(client, conv, answer, rating="down", note="x" * (NOTE_MAX_CHARS + 1))
    assert response.status_code == 400
    assert response.content.decode() == (
        f"A note is at most {NOTE_MAX_CHARS} characters; this one has {NOTE_MAX_CHARS + 1}."
    )
    htmx = _rate(client, conv, answer, rating="down", note="y" * 600, htmx=True).content.decode()
    assert 'role="alert">A note is at most 500 characters; this one has 600.' in htmx
    assert not AnswerFeedback.objects.exists()
    assert _rate(client, conv, answer, rating="sideways").status_code == 400


def test_bob_cannot_rate_alices_answer(bob, answered):
    conv, answer = answered
    client = _client(bob)
    assert _rate(client, conv, answer, rating="down", note="bob was here").status_code == 404
    # Nor through a conversation of his own.
    mine = Conversation.objects.create(owner=bob)
    assert _rate(client, mine, answer, rating="down").status_code == 404
    assert not AnswerFeedback.objects.exists()
    assert not AuditEvent.objects.filter(action=AuditEvent.FEEDBACK_GIVEN).exists()


def test_only_answers_are_rated_not_questions_or_deleted_conversations(alice, answered):
    conv, answer = answered
    question = conv.messages.get(role="user")
    client = _client(alice)
    assert _rate(client, conv, question, rating="up").status_code == 404
    Conversation.objects.filter(pk=conv.pk).update(deleted_at="2026-01-01T00:00:00Z")
    assert _rate(client, conv, answer, rating="up").status_code == 404


def test_pinned_conversations_come_first_under_their_heading(alice, bob):
    older = Conversation.objects.create(owner=alice, title="Old notes", last_event_seq=1)
    Conversation.objects.create(owner=alice, title="Fresh work", last_event_seq=1)
    client = _client(alice)
    response = client.post(reverse("conversation-pin", args=[older.pk]), {"pinned": "1"})
    assert response.status_code == 302
    page = client.get("/c/sidebar/").content.decode()
    assert page.index(">Pinned</h2>") < page.index("Old notes") < page.index("Today")
    assert page.index("Today") < page.index("Fresh work")
    chat = client.get(reverse("conversation", args=[older.pk])).content.decode()
    assert 'name="pinned" value="0"' in chat and ">Unpin</button>" in chat
    client.post(reverse("conversation-pin", args=[older.pk]), {"pinned": "0"})
    assert "Pinned" not in client.get("/c/sidebar/").content.decode()
    # Only the owner pins.
    assert (
        _client(bob).post(reverse("conversation-pin", args=[older.pk]), {"pinned": "1"}).status_code
        == 404
    )
    assert Conversation.objects.get(pk=older.pk).pinned_at is None
