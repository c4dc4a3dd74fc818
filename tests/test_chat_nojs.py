"""Every action that matters works as a plain POST with a redirect (a page without JavaScript):
the forms the chat page renders carry the viewer's CSRF token; the action view takes only POSTs,
only from the conversation's owner (404 for anyone else), only with a valid token."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from skills_app.models import Approval, Conversation, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="Mine")


@pytest.fixture
def pending(conversation):
    run = Run.objects.create(conversation=conversation, status=Run.WAITING)
    return Approval.objects.create(
        conversation=conversation,
        run=run,
        tool="Bash",
        input={"command": "ls"},
        call_text="Bash(ls)",
    )


def strict_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def approval_form_token(page: str, approval_id: int) -> str:
    card = page[page.index(f'id="approval-{approval_id}"') :]
    form = card[card.index("<form") : card.index("</form>")]
    assert 'method="post"' in form, "the approval form must be a POST form"
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)


def test_the_pages_approval_form_posts_with_a_valid_token_and_redirects(
    alice, conversation, pending
):
    client = strict_client(alice)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    token = approval_form_token(page, pending.pk)
    answered = client.post(
        f"/c/{conversation.pk}/act/",
        {
            "csrfmiddlewaretoken": token,
            "action": "approve",
            "approval_id": pending.pk,
            "answer": "deny",
            "reason": "not on a Friday",
        },
    )
    assert answered.status_code == 302 and answered["Location"] == f"/c/{conversation.pk}/"
    pending.refresh_from_db()
    assert (pending.status, pending.deny_reason) == ("deny", "not on a Friday")


def test_it_refuses_a_post_without_the_token(alice, conversation, pending):
    refused = strict_client(alice).post(
        f"/c/{conversation.pk}/act/",
        {"action": "approve", "approval_id": pending.pk, "answer": "allow_once"},
    )
    assert refused.status_code == 403
    pending.refresh_from_db()
    assert pending.status == Approval.PENDING


def test_another_person_gets_404_and_changes_nothing(bob, conversation, pending):
    client = strict_client(bob)
    client.get("/")  # a token of bob's own session
    token = client.cookies["csrftoken"].value
    for action, fields in (
        ("approve", {"approval_id": pending.pk, "answer": "allow_once"}),
        ("stop", {}),
        ("regenerate", {}),
        ("edit", {"message_id": 1, "text": "hijack"}),
    ):
        answer = client.post(
            f"/c/{conversation.pk}/act/", {"csrfmiddlewaretoken": token, "action": action, **fields}
        )
        assert answer.status_code == 404, action
    pending.refresh_from_db()
    assert pending.status == Approval.PENDING
    assert not Run.objects.filter(conversation=conversation, status=Run.STOPPED).exists()


def test_an_approval_of_another_conversation_is_refused_in_words(alice, conversation, bob):
    theirs = Conversation.objects.create(owner=bob)
    run = Run.objects.create(conversation=theirs, status=Run.WAITING)
    foreign = Approval.objects.create(
        conversation=theirs, run=run, tool="Bash", call_text="Bash(x)"
    )
    client = Client()
    client.force_login(alice)
    answer = client.post(
        f"/c/{conversation.pk}/act/",
        {"action": "approve", "approval_id": foreign.pk, "answer": "allow_once"},
        follow=True,
    )
    assert "no such approval request in this conversation" in answer.content.decode()
    foreign.refresh_from_db()
    assert foreign.status == Approval.PENDING


def test_the_action_url_takes_no_get(alice, conversation):
    client = Client()
    client.force_login(alice)
    assert client.get(f"/c/{conversation.pk}/act/?action=stop").status_code == 405
