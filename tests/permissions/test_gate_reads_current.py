"""What a run's gate reads at each call is current, though it is kept parsed between calls.

The gate keeps the admin rules, a conversation's grants and the stored MCP secrets parsed (or
opened) between calls, and reads their rows again at every call (`models.statements`): any change
made during a run, by the admin's form or by a bulk update that sends no signal and leaves
`updated_at` alone, decides the very next call, never the run after.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group
from django.db.models.signals import post_save
from django.utils import timezone

from skills_app.core.agent import TurnState
from skills_app.core.permissions import ToolCall
from skills_app.mcp import servers
from skills_app.mcp.filter import CARRIES_SECRET, stored_secrets
from skills_app.mcp.quota import over_quota
from skills_app.models import (
    Approval,
    AuditEvent,
    Conversation,
    ConversationGrant,
    McpOAuthGrant,
    McpServer,
    PermissionDecision,
    PermissionRule,
    Run,
)
from skills_app.models.statements import Insert, Statement
from skills_app.permissions.approvals import PermissionGate
from skills_app.runs.factory import mcp_leaves
from skills_app.workspaces import workspace_for

pytestmark = pytest.mark.django_db

ECHO = ToolCall("mcp__toy__echo", {"text": "hello"})


def _gate(user, *, mcp: bool = False) -> PermissionGate:
    """A run's gate; `mcp`: with the outbound filter of a run (`runs.factory.mcp_leaves`)."""
    conversation = Conversation.objects.create(owner=user, title="mid-run changes")
    run = Run.objects.create(conversation=conversation, status=Run.RUNNING, started_by=user)

    async def record(*args, **kwargs) -> int:
        return 0

    return PermissionGate(
        conversation_id=conversation.pk,
        run_id=run.pk,
        user_id=user.pk,
        workspace=workspace_for(conversation.pk),
        record=record,
        # An ask is answered at once (denied), so every call below decides without waiting.
        auto_answer=Approval.DENY,
        timeout=5,
        leaves=mcp_leaves(conversation.pk, user.pk) if mcp else None,
    )


def _decide(gate: PermissionGate, call: ToolCall = ECHO) -> tuple[str, int | None, str]:
    decision = async_to_sync(gate.decide)(call, TurnState())
    rule = decision.rule
    return decision.behavior, rule.rule_id if rule is not None else None, decision.reason


def test_a_rule_changed_during_a_run_decides_the_next_call(alice):
    gate = _gate(alice)
    allow = PermissionRule.objects.create(behavior="allow", rule_text="mcp__toy__echo")
    assert _decide(gate)[:2] == ("allow", allow.pk)
    assert _decide(gate)[:2] == ("allow", allow.pk)  # kept: the same rows, the same parse
    # An admin adds a deny rule mid-run: the next call is denied.
    deny = PermissionRule.objects.create(behavior="deny", rule_text="mcp__toy")
    assert _decide(gate)[:2] == ("deny", deny.pk)
    # Disabled by a bulk update (no signal, `updated_at` unchanged): allowed again.
    PermissionRule.objects.filter(pk=deny.pk).update(enabled=False)
    assert _decide(gate)[:2] == ("allow", allow.pk)
    # The allow rule's text edited by a bulk update: it no longer names the call, so it asks
    # (and the ask is answered "deny" here).
    PermissionRule.objects.filter(pk=allow.pk).update(rule_text="mcp__toy__other")
    assert _decide(gate)[:2] == ("deny", None)
    PermissionRule.objects.filter(pk=allow.pk).update(rule_text="mcp__toy__echo")
    assert _decide(gate)[:2] == ("allow", allow.pk)
    # Its behaviour turned to deny.
    PermissionRule.objects.filter(pk=allow.pk).update(behavior="deny")
    assert _decide(gate)[:2] == ("deny", allow.pk)
    # Deleted: no rule names the call any more.
    PermissionRule.objects.filter(pk=allow.pk).delete()
    assert _decide(gate)[:2] == ("deny", None)
    assert Approval.objects.filter(conversation_id=gate.conversation_id).count() == 2


def test_a_rules_audience_and_a_persons_groups_changed_during_a_run_decide_the_next_call(alice):
    gate = _gate(alice)
    deny = PermissionRule.objects.create(behavior="deny", rule_text="mcp__toy__echo")
    allow = PermissionRule.objects.create(behavior="allow", rule_text="mcp__toy")
    assert _decide(gate)[:2] == ("deny", deny.pk)
    # The deny rule limited to a group alice is not in: it no longer applies to her.
    reviewers, writers = Group.objects.create(name="reviewers"), Group.objects.create(name="w")
    deny.applies_to_groups.add(reviewers)
    assert _decide(gate)[:2] == ("allow", allow.pk)
    # Alice joins the group: it applies again.
    alice.groups.add(reviewers)
    assert _decide(gate)[:2] == ("deny", deny.pk)
    # The rule's group swapped for another (its row in the link table replaced, with SQLite's
    # ids perhaps the same id again): alice is not in that one.
    deny.applies_to_groups.set([writers])
    assert _decide(gate)[:2] == ("allow", allow.pk)
    # Limited to alice by name instead.
    deny.applies_to_groups.clear()
    deny.applies_to_users.add(alice)
    assert _decide(gate)[:2] == ("deny", deny.pk)
    deny.applies_to_users.remove(alice)
    deny.applies_to_groups.add(writers)
    assert _decide(gate)[:2] == ("allow", allow.pk)
    alice.groups.add(writers)
    assert _decide(gate)[:2] == ("deny", deny.pk)
    alice.groups.remove(writers)
    assert _decide(gate)[:2] == ("allow", allow.pk)


def test_a_grant_given_during_a_run_allows_the_next_call_of_that_conversation_only(alice):
    # (A grant is part of the audit trail: it is never deleted or changed.)
    gate, other = _gate(alice), _gate(alice)
    assert _decide(gate)[0] == "deny"  # asked, answered deny
    grant = ConversationGrant.objects.create(
        conversation_id=gate.conversation_id, rule_text="mcp__toy__echo"
    )
    assert _decide(gate)[:2] == ("allow", grant.pk)
    assert _decide(other)[0] == "deny"


def test_a_secret_stored_during_a_run_is_refused_at_the_next_call(alice, bob):
    gate = _gate(alice, mcp=True)
    PermissionRule.objects.create(behavior="allow", rule_text="mcp__toy__echo")
    first, second = "hk-first-0a1b2c3d4e", "hk-second-5f6a7b8c9d"
    server = servers.register(
        name="web",
        kind="http",
        registered_by=bob,
        url="https://web.example.com/mcp",
        headers={"Authorization": f"Bearer {first}"},
    )
    carrying = [ToolCall("mcp__toy__echo", {"text": f"say {value}"}) for value in (first, second)]
    assert _decide(gate, carrying[0])[::2] == ("deny", CARRIES_SECRET)
    assert _decide(gate, carrying[1])[0] == "allow"
    # The header changed mid-run: the new value is a secret at the next call, the old one not.
    server.headers = {"Authorization": f"Bearer {second}"}
    server.save()
    assert _decide(gate, carrying[1])[::2] == ("deny", CARRIES_SECRET)
    assert _decide(gate, carrying[0])[0] == "allow"
    refused = PermissionDecision.objects.filter(
        conversation_id=gate.conversation_id, decision=PermissionDecision.REFUSED
    )
    assert [d.input for d in refused.order_by("pk")] == [{"text": "say [stored secret]"}] * 2
    # A bulk update of the stored values (ciphertext made by the field, no save()).
    McpServer.objects.filter(pk=server.pk).update(env={"TOKEN": first}, headers={})
    assert _decide(gate, carrying[0])[::2] == ("deny", CARRIES_SECRET)
    assert _decide(gate, carrying[1])[0] == "allow"


def test_an_oauth_token_stored_during_a_run_is_a_secret_at_the_next_call(alice, bob):
    from skills_app.mcp import oauth_grants

    server = servers.register(
        name="cloud", kind="http", registered_by=bob, url="https://cloud.example/mcp", auth="oauth"
    )
    token = "at-0a1b2c3d4e5f6a7b"
    assert token not in stored_secrets()
    McpOAuthGrant.objects.create(
        user=alice,
        server=server,
        issuer="https://as.example",
        tokens=oauth_grants.seal(f'{{"access_token": "{token}", "token_type": "Bearer"}}'),
    )
    assert token in stored_secrets()
    refreshed = "at-9f8e7d6c5b4a3210"
    McpOAuthGrant.objects.filter(server=server).update(
        tokens=oauth_grants.seal(f'{{"access_token": "{refreshed}", "token_type": "Bearer"}}')
    )
    assert refreshed in stored_secrets() and token not in stored_secrets()


def test_the_quota_follows_its_setting_and_the_window(alice, settings):
    settings.MCP_CALLS_PER_MINUTE = 2
    assert over_quota(alice.pk) is None
    for _ in range(2):
        AuditEvent.objects.create(action=AuditEvent.MCP_CALLED, actor=alice, target="t")
    assert "2 calls in the last minute" in (over_quota(alice.pk) or "")
    settings.MCP_CALLS_PER_MINUTE = 3  # another shape of the statement
    assert over_quota(alice.pk) is None
    settings.MCP_CALLS_PER_MINUTE = 2
    # The older of the two leaves the window: a place is free again.
    oldest = AuditEvent.objects.filter(actor=alice).order_by("pk").first()
    AuditEvent.objects.filter(pk=oldest.pk).update(
        created_at=timezone.now() - timedelta(minutes=1, seconds=1)
    )
    assert over_quota(alice.pk) is None
    AuditEvent.objects.create(action=AuditEvent.MCP_CALLED, actor=alice, target="t")
    reason = over_quota(alice.pk) or ""
    assert "try this call again in 60 seconds" in reason or "in 59 seconds" in reason


def test_a_statement_runs_its_compiled_query_with_the_values_given(alice, bob):
    by_owner = Statement(
        lambda owner: (
            Conversation.objects.filter(owner_id=owner).order_by("pk").values_list("title")
        ),
        values=1,
    )
    Conversation.objects.create(owner=alice, title="a")
    Conversation.objects.create(owner=bob, title="b")
    assert by_owner.rows(alice.pk) == (("a",),)
    assert by_owner.rows(bob.pk) == (("b",),)
    with pytest.raises(TypeError):
        by_owner.rows()
    nth = Statement(
        lambda skip: Conversation.objects.order_by("title").values_list("title")[skip : skip + 1]
    )
    assert nth.rows(shape=(0,)) == (("a",),)
    assert nth.rows(shape=(1,)) == (("b",),)


def test_an_insert_writes_the_row_create_would_and_defers_to_a_save_signal(alice):
    conversation = Conversation.objects.create(owner=alice, title="rows")
    insert = Insert(PermissionDecision)
    before = timezone.now()
    values = {
        "conversation_id": conversation.pk,
        "tool": "mcp__toy__echo",
        "call_text": "mcp__toy__echo",
        "input": {"text": "hello", "n": [1, 2]},
        "decision": "allow",
        "source": PermissionDecision.Source.ADMIN,
        "reason": "allowed by rule",
    }
    insert.row(**values)
    row = PermissionDecision.objects.get()
    assert (row.input, row.run_id, row.rule_text, row.reason) == (
        values["input"],
        None,
        "",
        "allowed by rule",
    )
    assert before <= row.created_at <= timezone.now()
    heard: list[int] = []

    def saved(sender, instance, created, **kwargs) -> None:
        heard.append(instance.pk)

    post_save.connect(saved, sender=PermissionDecision)
    try:
        insert.row(**values)
    finally:
        post_save.disconnect(saved, sender=PermissionDecision)
    assert len(heard) == 1 and PermissionDecision.objects.count() == 2


def test_the_staged_skills_are_listed_through_no_link_a_command_planted(alice, tmp_path):
    from skills_app.hidden import staged_state

    conversation = Conversation.objects.create(owner=alice, title="links")
    ws = workspace_for(conversation.pk)
    (ws.skills_dir / "pdf").mkdir()
    listed = staged_state(conversation.pk)
    assert [name for name, _mtime in listed] == ["pdf"]
    # A command swaps skills/ for a link to a folder of its own: the link is not followed; the
    # workspace is repaired first (the link removed, a real, empty skills/ made), as before.
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "planted").mkdir(parents=True)
    moved = ws.root / "skills-moved"
    ws.skills_dir.rename(moved)
    ws.skills_dir.symlink_to(elsewhere)
    assert staged_state(conversation.pk) == ()
    assert ws.skills_dir.is_dir() and not ws.skills_dir.is_symlink()
