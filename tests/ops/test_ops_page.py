"""The operator page: staff only; workers, the queue and the event rate as the database has them."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from skills_app.models import Conversation, Run, RunEvent, Worker
from skills_app.ops import snapshot
from skills_app.runs import eventlog

pytestmark = pytest.mark.django_db

URL = "/ops/"


def _client(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def _figure(html: str, element_id: str) -> str:
    match = re.search(rf'id="{element_id}">(.*?)</td>', html, re.S)
    assert match, f"no #{element_id} on the page"
    return match.group(1).strip()


def test_it_sends_anonymous_visitors_to_the_login():
    response = _client().get(URL)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_it_refuses_people_who_are_not_staff(alice):
    assert _client(alice).get(URL).status_code == 403


def test_staff_see_it_and_find_it_in_the_navigation(auditor, alice):
    response = _client(auditor).get(URL)
    assert response.status_code == 200
    assert 'href="/ops/"' in _client(auditor).get("/").content.decode()
    assert 'href="/ops/"' not in _client(alice).get("/").content.decode()


def test_it_counts_workers_runs_and_the_queue(settings, auditor, alice):
    settings.RUN_EXECUTOR = "worker"
    settings.WORKER_STALE_SECONDS = 4
    now = timezone.now()
    Worker.objects.create(name="w1 pid 1 #aaaaaa", started_at=now, heartbeat_at=now, capacity=20)
    Worker.objects.create(
        name="w2 pid 2 #bbbbbb", started_at=now, heartbeat_at=now - timedelta(seconds=30)
    )
    conversation = Conversation.objects.create(owner=alice, title="SECRET-TITLE-7f3")
    Run.objects.create(conversation=conversation, status=Run.RUNNING, worker="w1 pid 1 #aaaaaa")
    for age in (90, 5):
        other = Conversation.objects.create(owner=alice)
        queued = Run.objects.create(
            conversation=other, status=Run.QUEUED, prompt="SECRET-PROMPT-7f3"
        )
        Run.objects.filter(pk=queued.pk).update(started_at=now - timedelta(seconds=age))
    Run.objects.create(conversation=conversation, status=Run.DONE)

    page = _client(auditor).get(URL).content.decode()

    assert _figure(page, "ops-live-workers") == "1"
    assert _figure(page, "ops-queued") == "2"
    assert _figure(page, "ops-running") == "1"
    oldest = float(_figure(page, "ops-oldest-queued").removesuffix(" s"))
    assert 89 <= oldest < 100
    assert "w2 pid 2 #bbbbbb" in page and "silent (no heartbeat)" in page
    # Counts and worker names only: nothing anyone wrote.
    assert "SECRET" not in page


def test_the_event_rate_reads_the_last_minute_only(auditor, alice):
    conversation = Conversation.objects.create(owner=alice)
    for i in range(30):
        eventlog.append_event(conversation.pk, "text.delta", {"index": 0, "text": str(i)})
    eventlog.append_event(conversation.pk, "message", {"message_id": 1})
    old = eventlog.append_event(conversation.pk, "text.delta", {"index": 0, "text": "old"})
    RunEvent.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(minutes=5))

    snap = snapshot.take()

    assert snap.text_events_per_second == pytest.approx(30 / 60)
    assert snap.events_per_second == pytest.approx(31 / 60)
    assert not snap.rate_capped


def test_the_queue_wait_is_measured_from_claims(auditor, alice):
    conversation = Conversation.objects.create(owner=alice)
    now = timezone.now()
    for wait in (0.5, 1.5, 61.0):
        run = Run.objects.create(conversation=conversation, status=Run.DONE)
        Run.objects.filter(pk=run.pk).update(
            started_at=now - timedelta(seconds=wait), claimed_at=now
        )
    snap = snapshot.take()
    assert snap.waits_claimed == 3
    assert snap.wait_median == pytest.approx(1.5, abs=0.01)
    assert snap.wait_max == pytest.approx(61.0, abs=0.01)


def test_htmx_refreshes_get_only_the_figures(auditor):
    response = _client(auditor).get(URL, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="ops-status"') and "<html" not in body


def test_with_inline_runs_it_says_no_workers_are_used(settings, auditor):
    settings.RUN_EXECUTOR = "inline"
    page = _client(auditor).get(URL).content.decode()
    assert "No workers are used" in page
