"""Long conversations are paged: the chat page holds the newest rows, earlier ones load on demand."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from skills_app.chat import conversations, rendering
from skills_app.models import Approval, Conversation, Message, Run

pytestmark = pytest.mark.django_db

PAGE = conversations.PAGE_ROWS
SECRET = "PAGED-HIDDEN-SECRET-5521"
START = timezone.now() - timedelta(days=1)


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def long_conversation(owner, count: int, *, hidden_every: int = 0) -> Conversation:
    """`count` rows, user and assistant in turn, a second apart; every `hidden_every`th is a
    hidden skill prompt (to the model, never to an ordinary user's browser)."""
    conversation = Conversation.objects.create(owner=owner, title="A long one")
    rows = []
    for seq in range(1, count + 1):
        hidden = bool(hidden_every) and seq % hidden_every == 0
        role = "user" if hidden or seq % 2 else "assistant"
        text = f"{SECRET} {seq}" if hidden else f"message {seq}"
        rows.append(
            Message(
                conversation=conversation,
                seq=seq,
                role=role,
                content=[{"type": "text", "text": text}],
                is_meta=hidden,
                kind="skill_prompt" if hidden else "text",
                created_at=START + timedelta(seconds=seq),
            )
        )
    Message.objects.bulk_create(rows)
    # created_at is set on save (auto_now_add, on the instances too): put the times the test
    # asked for back, in one statement per batch rather than one per row.
    for row in rows:
        row.created_at = START + timedelta(seconds=row.seq)
    Message.objects.bulk_update(rows, ["created_at"], batch_size=500)
    return conversation


def shown_seqs(conversation: Conversation, html: str) -> list[int]:
    ids = [int(pk) for pk in re.findall(r'id="message-(\d+)"', html)]
    seq_of = dict(conversation.messages.filter(pk__in=ids).values_list("pk", "seq"))
    return [seq_of[pk] for pk in ids]


def earlier(client: Client, conversation: Conversation, before: int, **headers):
    return client.get(f"/c/{conversation.pk}/earlier/", {"before": before}, **headers)


HTMX = {"HTTP_HX_REQUEST": "true"}


def test_a_long_conversation_shows_only_its_newest_rows_with_a_way_to_earlier_ones(alice):
    conversation = long_conversation(alice, PAGE * 3 + 7)
    body = client_for(alice).get(f"/c/{conversation.pk}/").content.decode()
    newest = list(range(PAGE * 2 + 8, PAGE * 3 + 8))
    assert shown_seqs(conversation, body) == newest
    assert "Load earlier messages" in body
    assert f"/c/{conversation.pk}/earlier/?before={newest[0]}" in body
    assert f"{PAGE * 2 + 7} earlier messages" in body


def test_a_conversation_of_one_page_has_no_earlier_control(alice):
    conversation = long_conversation(alice, PAGE)
    body = client_for(alice).get(f"/c/{conversation.pk}/").content.decode()
    assert shown_seqs(conversation, body) == list(range(1, PAGE + 1))
    assert "Load earlier messages" not in body


def test_the_page_does_not_grow_with_the_conversation(alice, monkeypatch):
    rendered = []
    real = rendering.render_message
    monkeypatch.setattr(
        rendering, "render_message", lambda row, **kw: rendered.append(row.pk) or real(row, **kw)
    )
    one_page = long_conversation(alice, PAGE)
    client = client_for(alice)
    short = client.get(f"/c/{one_page.pk}/").content
    rendered.clear()
    long = long_conversation(alice, PAGE * 20)
    body = client.get(f"/c/{long.pk}/").content
    assert len(rendered) == PAGE
    # Twenty times the rows, the same page: its rows, plus the control and longer numbers.
    assert len(body) < len(short) + 2_000 + PAGE * 8


def test_the_page_still_resumes_from_the_conversations_last_event(alice):
    conversation = long_conversation(alice, PAGE * 2)
    Conversation.objects.filter(pk=conversation.pk).update(last_event_seq=4321)
    body = client_for(alice).get(f"/c/{conversation.pk}/").content.decode()
    assert 'id="chat-seq" hidden data-seq="4321"' in body


def test_earlier_gives_the_owner_the_rows_before_the_oldest_one_shown(alice):
    conversation = long_conversation(alice, PAGE * 2 + 5)
    client = client_for(alice)
    response = earlier(client, conversation, PAGE + 6, **HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert shown_seqs(conversation, body) == list(range(6, PAGE + 6))
    assert "before=6" in body and "5 earlier messages" in body
    # The fragment replaces the control it came from: no page around it.
    assert "<html" not in body and 'id="composer"' not in body
    last = earlier(client, conversation, 6, **HTMX).content.decode()
    assert shown_seqs(conversation, last) == [1, 2, 3, 4, 5]
    assert "Load earlier messages" not in last


def test_earlier_is_not_found_for_anyone_but_the_owner(alice, bob, auditor):
    conversation = long_conversation(alice, PAGE + 10)
    assert earlier(client_for(bob), conversation, PAGE, **HTMX).status_code == 404
    assert earlier(client_for(auditor), conversation, PAGE, **HTMX).status_code == 404
    anonymous = earlier(Client(), conversation, PAGE, **HTMX)
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]


def test_earlier_says_what_is_wrong_with_a_bad_position(alice):
    conversation = long_conversation(alice, 3)
    for bad in ("", "x", "-4", "1e9"):
        response = client_for(alice).get(f"/c/{conversation.pk}/earlier/", {"before": bad})
        assert response.status_code == 400
        assert "before=" in response.content.decode()


def test_earlier_never_holds_hidden_rows_for_an_ordinary_owner(alice):
    conversation = long_conversation(alice, PAGE * 3, hidden_every=3)
    client = client_for(alice)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    oldest = shown_seqs(conversation, page)[0]
    body = earlier(client, conversation, oldest, **HTMX).content.decode()
    seqs = shown_seqs(conversation, body)
    assert SECRET not in page and SECRET not in body
    # Pages count the rows this person may see: a whole page of them.
    assert len(seqs) == PAGE and not any(seq % 3 == 0 for seq in seqs)


def test_earlier_holds_hidden_rows_marked_for_an_owner_who_may_inspect(alice):
    alice.user_permissions.add(Permission.objects.get(codename="inspect_injected_content"))
    conversation = long_conversation(alice, PAGE * 3, hidden_every=3)
    body = earlier(client_for(alice), conversation, PAGE * 2 + 1, **HTMX).content.decode()
    assert SECRET in body and "Hidden from the user" in body
    assert shown_seqs(conversation, body) == list(range(PAGE + 1, PAGE * 2 + 1))


def test_an_answered_approval_is_shown_on_the_page_of_the_rows_around_it(alice):
    conversation = long_conversation(alice, PAGE * 2)
    run = Run.objects.create(conversation=conversation, status=Run.DONE)
    approval = Approval.objects.create(
        conversation=conversation,
        run=run,
        tool="Bash",
        input={"command": "echo paged-approval-7781"},
        call_text="Bash(echo paged-approval-7781)",
        status=Approval.ALLOW_ONCE,
    )
    # Asked just after row 50: it belongs before row 51, on the earlier page.
    Approval.objects.filter(pk=approval.pk).update(
        created_at=START + timedelta(seconds=50, milliseconds=500)
    )
    client = client_for(alice)
    assert "paged-approval-7781" not in client.get(f"/c/{conversation.pk}/").content.decode()
    body = earlier(client, conversation, PAGE + 1, **HTMX).content.decode()
    assert body.count("paged-approval-7781") >= 1
    assert body.index("paged-approval-7781") < body.index(
        f'id="message-{conversation.messages.get(seq=51).pk}"'
    )


def test_a_tool_call_on_an_earlier_page_shows_its_result_from_the_next_one(alice):
    conversation = long_conversation(alice, PAGE * 2)
    # The earlier page ends with a call; its result is the newest page's first row.
    Message.objects.filter(conversation=conversation, seq=PAGE).update(
        role="assistant",
        kind="tool_use",
        content=[
            {"type": "tool_use", "id": "toolu_edge", "name": "Bash", "input": {"command": "ls"}}
        ],
    )
    Message.objects.filter(conversation=conversation, seq=PAGE + 1).update(
        role="user",
        kind="tool_result",
        content=[{"type": "tool_result", "tool_use_id": "toolu_edge", "content": "edge-result-42"}],
    )
    body = earlier(client_for(alice), conversation, PAGE + 1, **HTMX).content.decode()
    assert 'id="tool-toolu_edge"' in body and "edge-result-42" in body


def test_earlier_without_javascript_is_a_page_with_a_way_back(alice):
    conversation = long_conversation(alice, PAGE * 2 + 5)
    response = earlier(client_for(alice), conversation, PAGE + 6)
    body = response.content.decode()
    assert response.status_code == 200 and "<html" in body
    assert shown_seqs(conversation, body) == list(range(6, PAGE + 6))
    assert f'href="/c/{conversation.pk}/earlier/?before=6"' in body
    assert f'href="/c/{conversation.pk}/"' in body
