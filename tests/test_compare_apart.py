"""Comparison runs are test traffic (issue 29): out of the person's conversation list and
sidebar, and counted apart (and said so) in the audit's invocation totals."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from skills_app.models import Comparison, Conversation, Run, SkillInvocation

pytestmark = pytest.mark.django_db


@pytest.fixture
def traffic(auditor):
    chat = Conversation.objects.create(owner=auditor, title="Real work", last_event_seq=3)
    comparison = Comparison.objects.create(created_by=auditor, prompt="p", skills=[])
    compared = Conversation.objects.create(
        owner=auditor, title=f"Compare #{comparison.pk} · meta-message", last_event_seq=3
    )
    comparison.conversations.add(compared)
    for conversation, count in ((chat, 2), (compared, 5)):
        run = Run.objects.create(conversation=conversation, status=Run.DONE)
        for _ in range(count):
            SkillInvocation.objects.create(
                conversation=conversation, run=run, skill="pdf", caller="model", decision="allowed"
            )
    return chat, compared


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_comparison_runs_stay_out_of_the_list_and_the_sidebar(auditor, traffic):
    chat, compared = traffic
    client = client_for(auditor)
    listing = client.get("/").content.decode()
    assert "Real work" in listing and "Compare #" not in listing
    page = client.get(f"/c/{chat.pk}/").content.decode()
    assert f"sidebar-conversation-{compared.pk}" not in page
    # Still reachable from the comparison page: it is only left out of the list.
    assert client.get(f"/c/{compared.pk}/").status_code == 200


def test_the_audit_totals_count_comparison_runs_apart_and_say_so(auditor, traffic):
    client = client_for(auditor)
    home = client.get("/audit/").content.decode()
    assert re.search(r'data-count="total">2<', home)
    assert "Not counted here: 5 invocations made by delivery-profile comparisons" in home
    only = client.get("/audit/?origin=compare").content.decode()
    assert re.search(r'data-count="total">5<', only) and "Not counted here" not in only
    both = client.get("/audit/?origin=all").content.decode()
    assert re.search(r'data-count="total">7<', both)
