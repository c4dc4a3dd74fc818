"""The audit home: filters, counts, the chart of invocations per skill per day, rows that link to
the invocation detail, and the CSV export for inspectors."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from skills_app.audit.home import csv_cell
from skills_app.models import (
    AuditEvent,
    Conversation,
    SkillInvocation,
    SkillPackage,
    SkillVersion,
)

pytestmark = pytest.mark.django_db

MARKER = "HOME-INJECTED-MARKER-55e0"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def reader(django_user_model):
    """May view the audit, may not inspect hidden content."""
    user = django_user_model.objects.create_user("rita", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_skillinvocation"))
    return user


@pytest.fixture
def history(alice, bob):
    """Invocations over three days by two users, two callers, three decisions, two profiles."""
    package = SkillPackage.objects.create(name="pdf")
    v1 = SkillVersion.objects.create(package=package, digest="ab12" + "0" * 60, number=1)
    v2 = SkillVersion.objects.create(package=package, digest="cd34" + "0" * 60, number=2)
    a = Conversation.objects.create(owner=alice, title="Alice's reports", profile="meta-message")
    b = Conversation.objects.create(owner=bob, title="Bob's slides", profile="tool-result")
    today = timezone.now()
    rows = [
        (a, "pdf", v1, "model", "allowed", 0, MARKER),
        (a, "pdf", v2, "user", "allowed", 0, MARKER),
        (a, "pdf", v2, "model", "denied", 1, ""),
        (b, "slides", None, "model", "allowed", 1, "slides body"),
        (b, '=HYPERLINK("http://x")', None, "model", "failed", 2, ""),
    ]
    made = []
    for conversation, skill, version, caller, decision, days_ago, injected in rows:
        inv = SkillInvocation.objects.create(
            conversation=conversation,
            skill=skill,
            version=version,
            digest=version.digest if version else "",
            caller=caller,
            decision=decision,
            injected_text=injected,
            args="-cmd" if decision == "failed" else "",
        )
        SkillInvocation.objects.filter(pk=inv.pk).update(
            created_at=today - timedelta(days=days_ago)
        )
        made.append(inv)
    return made


@pytest.mark.parametrize("persona", ["alice", "skill_manager"])
def test_it_is_only_for_people_who_may_view_the_audit(request, persona, history):
    client = _client(request.getfixturevalue(persona))
    assert client.get(reverse("audit-home")).status_code == 403
    assert client.get(reverse("audit-export-csv")).status_code == 403
    anonymous = Client().get(reverse("audit-home"))
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_it_counts_every_invocation_and_links_each_row_to_its_detail(auditor, history):
    page = _client(auditor).get(reverse("audit-home"))
    counts = page.context["counts"]
    assert counts["total"] == 5
    assert (counts["allowed"], counts["denied"], counts["failed"]) == (3, 1, 1)
    assert (counts["by_model"], counts["by_user"]) == (4, 1)
    assert (counts["users"], counts["skills"], counts["conversations"]) == (2, 3, 2)
    body = page.content.decode()
    for inv in history:
        assert reverse("audit-invocation", args=[inv.pk]) in body


@pytest.mark.parametrize(
    ("query", "total"),
    [
        ("skill=pdf", 3),
        ("skill=pdf&version=v2", 2),
        ("version=ab12", 1),
        ("user=bob", 2),
        ("caller=user", 1),
        ("decision=denied", 1),
        ("profile=tool-result", 2),
        ("state=deleted", 0),
        ("state=kept", 5),
        ("since={yesterday}", 4),
        ("since={yesterday}&until={yesterday}", 2),
    ],
)
def test_each_filter_narrows_the_rows_and_the_counts(auditor, history, query, total):
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    page = _client(auditor).get(reverse("audit-home") + "?" + query.format(yesterday=yesterday))
    assert page.context["counts"]["total"] == total
    assert len(page.context["rows"]) == total


def test_a_bad_filter_says_what_to_write_and_shows_nothing(auditor, history):
    page = _client(auditor).get(reverse("audit-home") + "?version=latest")
    assert "Give a version number such as v3" in page.content.decode()
    assert page.context["counts"]["total"] == 0
    swapped = _client(auditor).get(reverse("audit-home") + "?since=2026-05-02&until=2026-05-01")
    assert "swap them" in swapped.content.decode()


def test_the_chart_draws_invocations_per_skill_per_day(auditor, history):
    page = _client(auditor).get(reverse("audit-home"))
    chart = page.context["chart"]
    assert chart.unit == "day" and chart.total == 5
    today = timezone.localdate().isoformat()
    cells = dict(chart.rows)
    assert dict(cells[today]) == {"pdf": 2}
    body = page.content.decode()
    assert body.count('data-skill="pdf"') >= 2 and "<svg" in body


def test_a_skill_name_with_markup_is_text_in_the_chart_and_the_rows(auditor, alice):
    conversation = Conversation.objects.create(owner=alice, title="x")
    SkillInvocation.objects.create(
        conversation=conversation,
        skill="<script>alert(1)</script>",
        caller="model",
        decision="failed",
    )
    body = _client(auditor).get(reverse("audit-home")).content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_inspectors_see_what_was_injected_and_others_see_it_withheld(auditor, reader, history):
    assert MARKER in _client(auditor).get(reverse("audit-home")).content.decode()
    withheld = _client(reader).get(reverse("audit-home")).content.decode()
    assert MARKER not in withheld and "withheld" in withheld
    # Not even its length: the size of hidden text is not for people who may not inspect it.
    assert f"{len(MARKER)} characters" not in withheld


def test_rows_of_a_deleted_conversation_are_marked(auditor, alice, history):
    client = _client(alice)
    conversation = history[0].conversation
    client.post(reverse("conversation-delete", args=[conversation.pk]))
    page = _client(auditor).get(reverse("audit-home") + "?state=deleted")
    assert page.context["counts"]["total"] == 3
    assert "deleted by the owner at" in page.content.decode()


def _csv(response) -> list[dict[str, str]]:
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


def test_the_csv_has_every_filtered_row_and_is_recorded(auditor, history):
    response = _client(auditor).get(reverse("audit-export-csv") + "?skill=pdf")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = _csv(response)
    assert sorted(int(r["invocation"]) for r in rows) == sorted(
        inv.pk for inv in history if inv.skill == "pdf"
    )
    assert {r["version"] for r in rows} == {"v1", "v2"}
    assert rows[0]["detail_url"].endswith(reverse("audit-invocation", args=[rows[0]["invocation"]]))
    assert MARKER in {r["injected_text"] for r in rows}
    event = AuditEvent.objects.get(action=AuditEvent.EXPORT)
    assert event.actor == auditor and event.detail["rows"] == 3
    assert event.detail["filters"] == {"skill": "pdf"} and event.detail["injected_text"] is True


def test_the_csv_is_not_paginated(auditor, alice):
    conversation = Conversation.objects.create(owner=alice, title="many")
    SkillInvocation.objects.bulk_create(
        SkillInvocation(conversation=conversation, skill="s", caller="model", decision="allowed")
        for _ in range(120)
    )
    assert len(_csv(_client(auditor).get(reverse("audit-export-csv")))) == 120


def test_the_csv_withholds_injected_text_from_people_who_may_not_inspect(reader, history):
    rows = _csv(_client(reader).get(reverse("audit-export-csv")))
    assert MARKER not in {r["injected_text"] for r in rows}
    assert "(withheld)" in {r["injected_text"] for r in rows}
    assert AuditEvent.objects.get(action=AuditEvent.EXPORT).detail["injected_text"] is False


def test_the_csv_cannot_smuggle_a_formula_into_a_spreadsheet(auditor, history):
    rows = _csv(_client(auditor).get(reverse("audit-export-csv") + "?decision=failed"))
    assert rows[0]["skill"] == '\'=HYPERLINK("http://x")'
    assert rows[0]["args"] == "'-cmd"


def test_a_bad_filter_exports_nothing_and_records_nothing(auditor, history):
    response = _client(auditor).get(reverse("audit-export-csv") + "?version=latest")
    assert response.status_code == 400 and b"Nothing was exported" in response.content
    assert not AuditEvent.objects.filter(action=AuditEvent.EXPORT).exists()


@pytest.mark.parametrize(
    ("value", "cell"),
    [("=1+1", "'=1+1"), ("+x", "'+x"), ("@sum", "'@sum"), ("plain", "plain"), (None, ""), (7, "7")],
)
def test_csv_cells_that_start_like_a_formula_get_a_quote(value, cell):
    assert csv_cell(value) == cell


def test_an_inspector_taking_someone_elses_conversation_is_recorded(auditor, alice, history):
    conversation = history[0].conversation
    assert (
        _client(alice).get(reverse("conversation-export", args=[conversation.pk])).status_code
        == 200
    )
    assert not AuditEvent.objects.filter(action=AuditEvent.EXPORT).exists()  # one's own: no record
    _client(auditor).get(reverse("conversation-export", args=[conversation.pk]))
    event = AuditEvent.objects.get(action=AuditEvent.EXPORT)
    assert event.actor == auditor and event.target == f"conversation #{conversation.pk} (JSONL)"
    assert event.detail["hidden_rows"] is True
