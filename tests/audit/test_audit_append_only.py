"""The audit is append-only: deleting a conversation hides it from its owner and nothing else;
no view, admin action, cascade or queryset removes an audit row; the purge is the only way out."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import ProtectedError
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from skills_app.audit.guard import AUDIT_MODELS, AuditDeletionError
from skills_app.models import (
    Approval,
    AuditEvent,
    Conversation,
    ConversationGrant,
    Message,
    ModelCall,
    PermissionDecision,
    Run,
    RunEvent,
    SkillInvocation,
    SkillPackage,
    SkillReview,
    SkillVersion,
)

pytestmark = pytest.mark.django_db

HIDDEN = "Base directory for this skill: /s\n\nAPPEND-ONLY-BODY-4d1e"


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _audited_conversation(owner, title: str = "Vendor contract review") -> Conversation:
    """A conversation with a row in every audit table: messages, a run with events and a model
    call, an allowed and a denied invocation, an approval, a grant."""
    conversation = Conversation.objects.create(owner=owner, title=title)
    run = Run.objects.create(conversation=conversation, status=Run.DONE, prompt="review it")
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="user",
        content=[{"type": "text", "text": "review the vendor contract"}],
        run=run,
    )
    allowed = SkillInvocation.objects.create(
        conversation=conversation,
        run=run,
        skill="contracts",
        caller="model",
        decision="allowed",
        decided_by="rule #1: allow Skill(contracts)",
        injected_text=HIDDEN,
    )
    Message.objects.create(
        conversation=conversation,
        seq=2,
        role="user",
        content=[{"type": "text", "text": HIDDEN}],
        is_meta=True,
        kind="skill_prompt",
        run=run,
        invocation=allowed,
    )
    SkillInvocation.objects.create(
        conversation=conversation, run=run, skill="payroll", caller="model", decision="denied"
    )
    approval = Approval.objects.create(
        conversation=conversation,
        run=run,
        tool="Bash",
        input={"command": "rm -rf out"},
        call_text="Bash(rm -rf out)",
        status=Approval.DENY,
        answered_by=owner,
    )
    ConversationGrant.objects.create(
        conversation=conversation, rule_text="Bash(ls *)", approval=approval
    )
    RunEvent.objects.create(conversation=conversation, run=run, seq=1, type="run.started")
    RunEvent.objects.create(
        conversation=conversation,
        run=run,
        seq=2,
        type="audit.tool",
        data={"tool": "Bash", "input": {"command": "ls"}, "invocation_id": allowed.pk},
    )
    ModelCall.objects.create(
        conversation=conversation,
        run=run,
        requested_model="claude-opus-4-8",
        model="claude-opus-4-8",
        input_tokens=120,
        output_tokens=30,
    )
    PermissionDecision.objects.create(
        conversation=conversation,
        run=run,
        tool="Bash",
        call_text="Bash(rm -rf out)",
        decision=PermissionDecision.DENY,
        source=PermissionDecision.Source.USER,
        approval=approval,
        approver=owner,
    )
    # A review step of an organisation skill version (the trail of who approved what).
    package = SkillPackage.objects.create(name=f"contracts-{conversation.pk}")
    version = SkillVersion.objects.create(
        package=package, digest="d" * 64, number=1, storage_path="x", skill_md="---\n---\n"
    )
    SkillReview.objects.create(
        version=version,
        package_name=package.name,
        version_number=1,
        action=SkillReview.UPLOADED,
        digest=version.digest,
    )
    return conversation


def _counts() -> dict[str, int]:
    """Rows per audit table, in one query (it runs after each of ~1,800 requests below)."""
    tables = [model._meta.db_table for model in AUDIT_MODELS]
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {table})" for table in tables))
        row = cursor.fetchone()
    return {model.__name__: n for model, n in zip(AUDIT_MODELS, row, strict=True)}


@pytest.fixture
def audited(alice):
    return _audited_conversation(alice)


# -- deleting a conversation ------------------------------------------------------------------


def test_deleting_a_conversation_keeps_every_audit_row(alice, audited):
    before = _counts()
    response = _client(alice).post(reverse("conversation-delete", args=[audited.pk]))
    assert response.status_code == 302
    after = _counts()
    assert after.pop("AuditEvent") == before.pop("AuditEvent") + 1
    assert after == before
    audited.refresh_from_db()
    assert audited.deleted_by == alice and audited.deleted_at is not None
    event = AuditEvent.objects.get(action=AuditEvent.CONVERSATION_DELETED)
    assert event.actor == alice and event.target == f"conversation #{audited.pk}"


def test_the_owner_no_longer_reaches_a_deleted_conversation_anywhere(alice, audited):
    client = _client(alice)
    client.post(reverse("conversation-delete", args=[audited.pk]))
    assert "Vendor contract review" not in client.get("/").content.decode()
    assert "Vendor contract" not in client.get("/?q=vendor").content.decode()
    for url in (
        reverse("conversation", args=[audited.pk]),
        reverse("conversation-export", args=[audited.pk]),
        reverse("conversation-file", args=[audited.pk, "out/a.txt"]),
        reverse("conversation-delete", args=[audited.pk]),
    ):
        assert client.get(url).status_code == 404, url
    assert (
        client.post(reverse("conversation-rename", args=[audited.pk]), {"title": "x"}).status_code
        == 404
    )


def test_a_deleted_conversation_cannot_start_a_run(alice, audited):
    from skills_app.runs.supervisor import RunError, _create_run

    audited.deleted_at = timezone.now()
    audited.save(update_fields=["deleted_at"])

    class _Client:
        model, label, is_demo = "demo", "demo", True

    with pytest.raises(RunError, match="deleted"):
        _create_run(
            audited.pk,
            "hello",
            _Client(),
            inline=True,
            retry=False,
            user_id=alice.pk,
            auto_answer=None,
        )
    assert not Run.objects.filter(conversation=audited, prompt="hello").exists()


def test_pending_approvals_of_a_deleted_conversation_are_cancelled(alice, audited):
    run = audited.runs.get()
    pending = Approval.objects.create(
        conversation=audited, run=run, tool="Bash", call_text="Bash(ls)", input={"command": "ls"}
    )
    _client(alice).post(reverse("conversation-delete", args=[audited.pk]))
    pending.refresh_from_db()
    assert pending.status == Approval.CANCELLED


def test_auditors_still_see_a_deleted_conversation_marked_as_deleted_by_the_owner(
    alice, auditor, audited
):
    client = _client(auditor)
    denied_before = client.get(reverse("audit-home") + "?decision=denied").context["counts"]
    _client(alice).post(reverse("conversation-delete", args=[audited.pk]))
    home = client.get(reverse("audit-home") + "?decision=denied")
    assert home.context["counts"]["total"] == denied_before["total"] == 1
    assert "deleted by the owner at" in home.content.decode()
    invocations = client.get(reverse("audit-invocations") + "?decision=denied").content.decode()
    assert "payroll" in invocations and "deleted by the owner at" in invocations
    page = client.get(reverse("audit-conversation", args=[audited.pk])).content.decode()
    assert "deleted by the owner at" in page and "APPEND-ONLY-BODY-4d1e" in page
    listed = client.get(reverse("audit-conversations") + "?q=vendor").content.decode()
    assert "Vendor contract review" in listed and "deleted by the owner" in listed
    export = client.get(reverse("conversation-export", args=[audited.pk]))
    assert export.status_code == 200 and "APPEND-ONLY-BODY-4d1e" in export.content.decode()


# -- nothing deletes an audit row -------------------------------------------------------------


@pytest.mark.parametrize("model", AUDIT_MODELS, ids=lambda m: m.__name__)
def test_no_queryset_or_instance_delete_removes_an_audit_row(alice, audited, model):
    AuditEvent.objects.create(action=AuditEvent.EXPORT, target="x")
    before = _counts()
    # The guard (AuditDeletionError), or before it a PROTECT key into the audit; each attempt in
    # its own savepoint, as a refused deletion rolls back the transaction it ran in.
    with pytest.raises(ProtectedError), transaction.atomic():
        model.objects.all().delete()
    with pytest.raises(ProtectedError), transaction.atomic():
        model.objects.first().delete()
    assert _counts() == before


def test_the_guard_itself_refuses_a_row_nothing_points_at(alice):
    empty = Conversation.objects.create(owner=alice, title="Never used")
    with pytest.raises(AuditDeletionError, match="part of the audit trail"), transaction.atomic():
        empty.delete()
    assert Conversation.objects.filter(pk=empty.pk).exists()


def test_deleting_a_user_with_audit_history_is_refused_and_cascades_nowhere(alice, audited):
    before = _counts()
    with pytest.raises(ProtectedError), transaction.atomic():
        alice.delete()
    with pytest.raises(ProtectedError), transaction.atomic():
        User.objects.filter(pk=alice.pk).delete()
    assert _counts() == before
    assert User.objects.filter(pk=alice.pk).exists()


def test_a_user_who_only_answered_an_approval_is_not_deleted_either(alice, bob, audited):
    Approval.objects.filter(conversation=audited).update(answered_by=bob)
    with pytest.raises(ProtectedError), transaction.atomic():
        bob.delete()


def test_a_user_without_audit_history_can_still_be_deleted(bob):
    bob.delete()  # positive control: the guard is about the audit, not about users
    assert not User.objects.filter(username="bob").exists()


def test_the_admin_refuses_to_delete_a_user_with_audit_history(admin_user, alice, audited):
    client = _client(admin_user)
    url = reverse("admin:auth_user_delete", args=[alice.pk])
    page = client.get(url).content.decode()
    # Refused up front: the audit rows are protected (or not deletable through the admin).
    assert "Cannot delete user" in page
    client.post(url, {"post": "yes"})
    bulk = client.post(
        reverse("admin:auth_user_changelist"),
        {"action": "delete_selected", "_selected_action": [alice.pk], "post": "yes"},
    )
    assert bulk.status_code in (200, 302)
    assert User.objects.filter(pk=alice.pk).exists()
    assert Conversation.objects.filter(pk=audited.pk).exists()


@pytest.mark.parametrize(
    "model", [SkillInvocation, Approval, Run, AuditEvent], ids=lambda m: m.__name__
)
def test_no_admin_page_changes_or_deletes_an_audit_row(admin_user, alice, audited, model):
    AuditEvent.objects.create(action=AuditEvent.EXPORT, target="x")
    row = model.objects.first()
    client = _client(admin_user)
    name = f"admin:skills_app_{model._meta.model_name}"
    before = _counts()
    assert client.post(reverse(f"{name}_delete", args=[row.pk]), {"post": "yes"}).status_code == 403
    assert client.post(reverse(f"{name}_change", args=[row.pk]), {}).status_code == 403
    client.post(
        reverse(f"{name}_changelist"),
        {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"},
    )
    assert _counts() == before


def _patterns(resolvers, prefix: str = "") -> list[str]:
    out: list[str] = []
    for entry in resolvers:
        if isinstance(entry, URLResolver):
            out += _patterns(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            out.append(prefix + str(entry.pattern))
    return out


def _urls(ids: list[int]) -> list[str]:
    """Every route of the site with its parameters filled with each of `ids`."""
    urls: set[str] = set()
    for route in _patterns(get_resolver().url_patterns):
        if route.startswith("^") or "(?P" in route:
            continue  # the admin's catch-all and static regexes: covered by the admin tests
        for pk in ids:
            url = re.sub(r"<path:\w+>", "out/x.txt", route)
            url = re.sub(r"<(?:int:)?\w+>", str(pk), url)
            urls.add("/" + url.lstrip("/"))
    return sorted(urls)


def test_no_view_of_the_site_removes_an_audit_row(alice, auditor, admin_user, audited):
    """Every route, GET and a POST shaped like a confirmed delete, as the owner, the auditor and
    a superuser: between them every power over these rows (another ordinary user has less
    power over alice's rows than alice)."""
    run = audited.runs.get()
    ids = sorted(
        {
            audited.pk,
            run.pk,
            audited.invocations.first().pk,
            audited.approvals.first().pk,
            alice.pk,
        }
    )
    before = _counts()
    for user in (alice, auditor, admin_user):
        client = _client(user)
        for url in _urls(ids):
            if client.session.get("_auth_user_id") != str(user.pk):
                client = _client(user)  # a route logged out (or in as someone else)
            client.get(url)
            client.post(
                url,
                {"post": "yes", "action": "delete_selected", "_selected_action": ids},
            )
            after = _counts()
            for table, n in before.items():
                assert after[table] >= n, f"{url} as {user} removed {table} rows"
    audited.refresh_from_db()
    # The owner's own delete view was among them: hidden, and nothing removed.
    assert audited.deleted_at is not None


# -- the purge --------------------------------------------------------------------------------


def _age(conversation: Conversation, days: int) -> None:
    old = timezone.now() - timedelta(days=days)
    Conversation.objects.filter(pk=conversation.pk).update(created_at=old, updated_at=old)
    for model in (Message, RunEvent):
        model.objects.filter(conversation=conversation).update(created_at=old)


def test_purge_without_a_retention_or_a_date_refuses(audited):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="kept forever"):
        call_command("audit", "purge")


def test_a_purge_dry_run_counts_and_removes_nothing(alice, audited, capsys):
    from django.core.management import call_command

    _age(audited, 400)
    before = _counts()
    call_command("audit", "purge", "--before", str(timezone.localdate() - timedelta(days=30)))
    assert "Dry run" in capsys.readouterr().out
    assert _counts() == before


def test_a_purge_removes_old_conversations_whole_and_records_itself(alice, bob, audited, capsys):
    from django.core.management import call_command

    _client(alice).post(reverse("conversation-delete", args=[audited.pk]))
    _age(audited, 400)
    recent = _audited_conversation(bob, "Recent work")
    cutoff = timezone.localdate() - timedelta(days=30)
    call_command("audit", "purge", "--before", str(cutoff), "--yes")
    assert "Purged" in capsys.readouterr().out
    assert not Conversation.objects.filter(pk=audited.pk).exists()
    assert not SkillInvocation.objects.filter(conversation_id=audited.pk).exists()
    assert not Message.objects.filter(conversation_id=audited.pk).exists()
    assert recent.invocations.count() == 2 and recent.messages.count() == 2
    purge = AuditEvent.objects.get(action=AuditEvent.PURGE)
    assert purge.detail["conversation_ids"] == [audited.pk]
    assert purge.detail["skill_invocations"] == 2
    assert purge.actor_name.startswith("manage.py")
    # The trail is never purged: the deletion record is still there, and so is the purge's own.
    assert AuditEvent.objects.filter(action=AuditEvent.CONVERSATION_DELETED).exists()
    with pytest.raises(AuditDeletionError), transaction.atomic():
        purge.delete()


def test_a_purge_keeps_a_conversation_with_any_recent_row(alice, audited):
    from skills_app.audit import retention

    _age(audited, 400)
    RunEvent.objects.filter(conversation=audited, seq=2).update(created_at=timezone.now())
    report = retention.purge(timezone.now() - timedelta(days=30), actor_name="test", dry_run=False)
    assert report.conversation_ids == []
    assert Conversation.objects.filter(pk=audited.pk).exists()


def test_a_purge_may_not_reach_into_the_retention_window(settings, audited):
    from django.core.management import CommandError, call_command

    settings.AUDIT_RETENTION_DAYS = 365
    with pytest.raises(CommandError, match="AUDIT_RETENTION_DAYS=365"):
        call_command("audit", "purge", "--before", str(timezone.localdate() - timedelta(days=30)))


def test_the_retention_setting_alone_sets_the_cutoff(settings, alice, audited, capsys):
    from django.core.management import call_command

    settings.AUDIT_RETENTION_DAYS = 365
    _age(audited, 400)
    call_command("audit", "purge", "--yes")
    assert not Conversation.objects.filter(pk=audited.pk).exists()
    assert AuditEvent.objects.get(action=AuditEvent.PURGE).detail["retention_days"] == 365


def test_a_date_that_is_not_a_date_says_how_to_write_it(audited):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="YYYY-MM-DD"):
        call_command("audit", "purge", "--before", "last tuesday")


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_of_a_deleted_conversation_refuses_its_owner(alice):
    from asgiref.sync import sync_to_async
    from channels.testing import WebsocketCommunicator

    from webapp.asgi import application

    conversation = await sync_to_async(_audited_conversation)(alice)
    client = await sync_to_async(_client)(alice)
    await sync_to_async(client.post)(reverse("conversation-delete", args=[conversation.pk]))
    cookie = client.cookies["sessionid"].value
    communicator = WebsocketCommunicator(
        application,
        f"/ws/conversations/{conversation.pk}/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())],
    )
    connected, code = await communicator.connect(timeout=10)
    assert not connected and code == 4403
    await communicator.disconnect()
