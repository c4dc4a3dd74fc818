"""What people and administrators see of the spending: your usage page, the admin's spending
report with its chart, the limits and where to raise them."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from skills_app.models import Conversation, SpendReservation
from skills_app.policy import budgets, storage
from skills_app.policy.access import policy_for
from tests.support.org import group, user_limits

pytestmark = pytest.mark.django_db


def spend(user, amount: str, *, model="claude-haiku-4-5", purpose="turn"):
    held = budgets.reserve(
        policy_for(user.pk), model=model, amount=Decimal(amount), purpose=purpose
    )
    budgets.settle(held, Decimal(amount))


def test_a_person_sees_their_spend_and_what_is_left(alice, settings):
    settings.STORAGE_QUOTA_BYTES = 10_000_000
    team = group("Team", daily="20", models=["claude-opus-4-8"])
    alice.groups.add(team)
    user_limits(alice, daily="2", monthly="30")
    spend(alice, "0.75")
    conversation = Conversation.objects.create(owner=alice)
    storage.settle(alice.pk, conversation.pk, 0, 2_500_000)
    client = Client()
    client.force_login(alice)
    page = client.get("/usage/").content.decode()
    assert "Your usage" in page
    assert "$0.75" in page and "$2.00" in page and "$1.25" in page  # spent, limit, left
    assert "Group Team" in page and "$20.00" in page and "$19.25" in page
    assert "2.5 MB" in page and "10.0 MB" in page
    assert 'href="/usage/"' in page  # in the menu


def test_the_spending_report_charts_dollars_per_user_and_links_the_limits(
    alice, bob, auditor, admin_user
):
    user_limits(alice, daily="2")
    spend(alice, "1.50")
    spend(bob, "0.40", purpose="trigger")
    client = Client()
    client.force_login(auditor)
    page = client.get("/audit/spend/").content.decode()
    assert 'id="spend-chart"' in page and "<svg" in page
    assert 'data-name="alice" data-cents="150"' in page
    assert "$1.90 in all" in page
    # The auditor reads the limits; raising one is the administrator's.
    assert "user alice" in page and "Raise or lower" not in page
    admin = Client()
    admin.force_login(admin_user)
    assert "Raise or lower" in admin.get("/audit/spend/").content.decode()
    per_purpose = client.get("/audit/spend/", {"per": "purpose"}).content.decode()
    assert 'data-name="trigger" data-cents="40"' in per_purpose
    per_model = client.get("/audit/spend/", {"per": "model"}).content.decode()
    assert 'data-name="claude-haiku-4-5" data-cents="190"' in per_model


def test_the_spending_report_is_for_the_audit_roles_only(alice):
    client = Client()
    client.force_login(alice)
    assert client.get("/audit/spend/").status_code == 403


def test_per_group_spending_counts_every_member(alice, bob, auditor):
    team = group("Team")
    alice.groups.add(team)
    bob.groups.add(team)
    spend(alice, "1")
    spend(bob, "2")
    assert SpendReservation.objects.count() == 2
    client = Client()
    client.force_login(auditor)
    page = client.get("/audit/spend/", {"per": "group"}).content.decode()
    assert 'data-name="Team" data-cents="300"' in page
