"""Auditors read the feedback on answers written with a skill version; nobody else does."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from skills_app.core.transcript import StoredMessage
from skills_app.models import AnswerFeedback, Conversation, Run, SkillInvocation
from skills_app.runs import store

pytestmark = pytest.mark.django_db

DIGEST = "b" * 64


def _answered_run(owner, skill: str, digest: str, text: str, decision: str = "allowed"):
    """A conversation with one run that invoked (skill, digest) and the answer of that run."""
    conv = Conversation.objects.create(owner=owner, title=f"About {skill}")
    run = Run.objects.create(conversation=conv, status=Run.DONE)
    inv = SkillInvocation.objects.create(
        conversation=conv, run=run, skill=skill, digest=digest, caller="model", decision=decision
    )
    answer = store.append_message(conv.pk, StoredMessage.text("assistant", text), run_id=run.pk)
    return inv, answer


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_auditors_see_counts_and_notes_for_the_version_only(alice, bob, auditor):
    inv, good = _answered_run(alice, "trip-planner", DIGEST, "Go north.")
    _, bad = _answered_run(bob, "trip-planner", DIGEST, "Go south.")
    _, other_version = _answered_run(bob, "trip-planner", "c" * 64, "Go east.")
    _, denied = _answered_run(bob, "trip-planner", DIGEST, "Go west.", decision="denied")
    AnswerFeedback.objects.create(user=alice, message=good, rating="up", note="Spot on")
    AnswerFeedback.objects.create(user=bob, message=bad, rating="down", note="<i>Wrong</i> road")
    AnswerFeedback.objects.create(user=bob, message=other_version, rating="down", note="elsewhere")
    AnswerFeedback.objects.create(user=bob, message=denied, rating="down", note="not loaded")
    client = _client(auditor)
    detail = client.get(reverse("audit-invocation", args=[inv.pk])).content.decode()
    assert "1 thumbs up, 1 thumbs down" in detail
    page = client.get(reverse("audit-version-feedback", args=["trip-planner", DIGEST]))
    html = page.content.decode()
    counts = html[html.index('id="feedback-counts"') :]
    assert "<dt>Thumbs up</dt><dd>1</dd>" in counts and "<dt>Thumbs down</dt><dd>1</dd>" in counts
    assert "Spot on" in html and "&lt;i&gt;Wrong&lt;/i&gt; road" in html and "<i>Wrong" not in html
    assert "elsewhere" not in html and "not loaded" not in html


def test_ordinary_users_do_not_see_anyones_feedback(alice, bob):
    _, answer = _answered_run(alice, "trip-planner", DIGEST, "Go north.")
    AnswerFeedback.objects.create(user=alice, message=answer, rating="down", note="alice's remark")
    url = reverse("audit-version-feedback", args=["trip-planner", DIGEST])
    for person in (alice, bob):
        response = _client(person).get(url)
        assert response.status_code == 403 and b"alice's remark" not in response.content


def test_an_unknown_version_is_not_found(auditor):
    url = reverse("audit-version-feedback", args=["trip-planner", DIGEST])
    assert _client(auditor).get(url).status_code == 404
