"""The first screen starts work (issue 29): signing in lands on a conversation ready for a
message, New reuses an unused conversation, developer settings are for staff only, the
introduction to skills can be closed for good; times are shown in the person's own time zone."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from skills_app.core.transcript import REPLACED
from skills_app.models import Conversation, Message, UserPreference

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_signing_in_lands_on_a_conversation_with_the_message_box(alice):
    client = Client()
    landed = client.post(
        "/accounts/login/", {"username": "alice", "password": "alice-pass-123"}, follow=True
    )
    conversation = Conversation.objects.get(owner=alice)
    assert landed.redirect_chain[-1][0] == f"/c/{conversation.pk}/"
    page = landed.content.decode()
    assert 'aria-label="Message"' in page and "Getting started with skills" in page


def test_new_reuses_the_unused_conversation_instead_of_making_another(alice):
    client = client_for(alice)
    first = client.get("/c/start/")["Location"]
    assert client.post("/c/new/")["Location"] == first
    assert client.get("/c/start/")["Location"] == first
    assert Conversation.objects.filter(owner=alice).count() == 1
    # Once something was sent in it, New makes a new one.
    used = Conversation.objects.get(owner=alice)
    Message.objects.create(
        conversation=used, seq=1, role="user", content=[{"type": "text", "text": "hi"}]
    )
    Conversation.objects.filter(pk=used.pk).update(last_event_seq=1)
    assert client.post("/c/new/")["Location"] != first
    assert Conversation.objects.filter(owner=alice).count() == 2


def test_a_renamed_or_deleted_empty_conversation_is_not_reused(alice):
    client = client_for(alice)
    Conversation.objects.create(owner=alice, title="Kept for later")
    Conversation.objects.create(owner=alice, deleted_at=timezone.now())
    client.post("/c/new/")
    assert Conversation.objects.filter(owner=alice).count() == 3


def test_only_staff_choose_the_delivery_profile(alice, auditor):
    page = client_for(alice).get("/").content.decode()
    assert "Skills delivered as" not in page
    client_for(alice).post("/c/new/", {"profile": "tool-result"})
    assert Conversation.objects.get(owner=alice).profile != "tool-result"
    assert "Skills delivered as" in client_for(auditor).get("/").content.decode()
    client_for(auditor).post("/c/new/", {"profile": "tool-result"})
    assert Conversation.objects.get(owner=auditor).profile == "tool-result"


def test_the_demo_banner_tells_only_staff_about_server_settings(alice, auditor, settings):
    settings.ANTHROPIC_API_KEY = ""
    plain = client_for(alice).get("/").content.decode()
    assert "Demo model (offline)" in plain and "ANTHROPIC_API_KEY" not in plain
    assert "ANTHROPIC_API_KEY" in client_for(auditor).get("/").content.decode()


def test_the_introduction_can_be_closed_for_good(alice):
    client = client_for(alice)
    url = client.get("/c/start/")["Location"]
    assert "Getting started with skills" in client.get(url).content.decode()
    closed = client.post("/me/intro/dismiss/", {"next": url})
    assert closed["Location"] == url
    assert "Getting started with skills" not in client.get(url).content.decode()


def test_closing_the_introduction_never_redirects_off_the_site(alice):
    closed = client_for(alice).post("/me/intro/dismiss/", {"next": "https://evil.example/"})
    assert closed["Location"] == "/"


@pytest.mark.parametrize(
    "zone",
    ["Not/AZone", "../../etc/passwd", "UTC<script>alert(1)</script>", "x" * 5000, "", "Europe/"],
)
def test_a_time_zone_the_server_does_not_know_is_refused_and_changes_nothing(alice, zone):
    client = client_for(alice)
    client.post("/me/time-zone/", {"time_zone": "Europe/Berlin"})
    refused = client.post("/me/time-zone/", {"time_zone": zone})
    assert refused.status_code == 400
    assert refused["Content-Type"].startswith("text/plain")
    assert "not a time zone this server knows" in refused.content.decode()
    assert UserPreference.objects.get(user=alice).time_zone == "Europe/Berlin"


def test_a_time_zone_needs_a_signed_in_person_and_a_post(alice):
    assert Client().post("/me/time-zone/", {"time_zone": "Europe/Berlin"}).status_code == 302
    assert client_for(alice).get("/me/time-zone/?time_zone=Europe/Berlin").status_code == 405
    assert not UserPreference.objects.exists()


def test_times_on_the_page_are_in_the_persons_time_zone(alice):
    conversation = Conversation.objects.create(owner=alice)
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="user",
        content=[{"type": "text", "text": "an old version"}],
        meta={
            "excluded": REPLACED,
            "replaced_by": "edit",
            "replaced_at": "2026-01-15T09:30:00+00:00",
        },
    )
    client = client_for(alice)
    assert client.post("/me/time-zone/", {"time_zone": "Asia/Tokyo"}).status_code == 204
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    # 09:30 UTC is 18:30 in Tokyo; the element keeps the instant for the script.
    assert (
        'datetime="2026-01-15T18:30:00+09:00" data-local="time" title="Asia/Tokyo">18:30<' in page
    )
    assert 'data-time-zone="Asia/Tokyo"' in page
    # Another person's pages stay in the server's zone.
    assert (
        'data-time-zone="UTC"'
        in client_for(type(alice).objects.create_user("zed", password="zed-pass-123"))
        .get("/")
        .content.decode()
    )
