"""Attested annotations: a tool's readOnlyHint or destructiveHint sets the default of a call no
rule names only when the reviewer who approved its definition attested them, and only for that
definition (a changed one, a new hash, loses it). Rules still win. No server is started: these
are the decisions a run and the rule tester make before any call leaves."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.urls import reverse

from skills_app.chat.rendering import render_approval
from skills_app.core.agent import TurnState
from skills_app.core.mcp import ToolDefinition
from skills_app.core.permissions import ToolCall
from skills_app.mcp import definitions, servers
from skills_app.models import Approval, Conversation, McpToolDefinition, PermissionRule, Run
from skills_app.permissions.approvals import PermissionGate
from skills_app.permissions.tester_views import try_call
from skills_app.runs.factory import workspace_for

pytestmark = pytest.mark.django_db

GET = ToolDefinition("get_ticket", "Read one ticket.", annotations={"readOnlyHint": True})
CLOSE = ToolDefinition(
    "close_ticket", "Close a ticket for good.", annotations={"destructiveHint": True}
)


@pytest.fixture
def reviewer(django_user_model):
    return django_user_model.objects.create_superuser("lee", password="lee-pass-123")


@pytest.fixture
def server(admin_user):
    server = servers.register(
        name="tickets",
        kind="stdio",
        registered_by=admin_user,
        argv=["/opt/tickets/bin/serve", "--stdio"],
        everyone=True,
    )
    definitions.store_listing(server, [GET, CLOSE])
    return server


def _review(client, reviewer, server, *, attest: list[str]) -> str:
    """Approve every pending definition on the review page, attesting the hints of `attest`."""
    rows = {r.tool: r.content_hash for r in McpToolDefinition.objects.filter(status="pending")}
    client.force_login(reviewer)
    page = client.post(
        reverse("admin:skills_app_mcpserver_review", args=[server.pk]),
        {"definition": list(rows.values()), "attest": [rows[t] for t in attest], "approve": "1"},
        follow=True,
    )
    return page.content.decode()


def _gate(user) -> PermissionGate:
    conversation = Conversation.objects.create(owner=user, title="t")
    run = Run.objects.create(conversation=conversation, status=Run.RUNNING, started_by=user)

    async def record(*args, **kwargs) -> int:
        return 0

    return PermissionGate(
        conversation_id=conversation.pk,
        run_id=run.pk,
        user_id=user.pk,
        workspace=workspace_for(conversation.pk),
        record=record,
    )


def _call(tool: str) -> ToolCall:
    return ToolCall(f"mcp__tickets__{tool}", {"id": "T-1"})


def test_the_review_page_offers_to_attest_the_hints_as_shown(client, reviewer, server):
    client.force_login(reviewer)
    html = client.get(reverse("admin:skills_app_mcpserver_review", args=[server.pk])).content
    text = html.decode()
    assert 'name="attest"' in text
    assert "readOnlyHint: true" in text and "destructiveHint: true" in text


def test_an_unattested_read_only_hint_never_allows(client, alice, reviewer, server):
    _review(client, reviewer, server, attest=[])
    decision = _gate(alice).rules(_call("get_ticket"), TurnState())
    assert decision.behavior == "ask"
    assert "read-only: claimed by the server, not attested" in decision.reason


def test_an_attested_read_only_hint_allows_and_the_tester_says_who_attested(
    client, alice, reviewer, server
):
    html = _review(client, reviewer, server, attest=["get_ticket", "close_ticket"])
    assert "hints attested" in html
    row = McpToolDefinition.objects.get(tool="get_ticket")
    assert row.hints_attested_by_name == "lee"
    gate = _gate(alice)
    got = gate.rules(_call("get_ticket"), TurnState())
    assert (got.behavior, got.rule) == ("allow", None)
    assert "read-only attested by lee" in got.reason
    reading = try_call(_call("get_ticket"), "")
    assert reading.decision.behavior == "allow"
    assert "No rule names mcp__tickets__get_ticket; read-only attested by lee" in (
        reading.call_note
    )
    # An attested destructive hint keeps asking, and the approval card says why.
    closing = gate.rules(_call("close_ticket"), TurnState())
    assert closing.behavior == "ask"
    assert "destructive (attested by lee)" in closing.reason
    approval = Approval.objects.create(
        conversation_id=gate.conversation_id,
        run_id=gate.run_id,
        tool="mcp__tickets__close_ticket",
        input={"id": "T-1"},
        call_text="mcp__tickets__close_ticket",
        reason=closing.reason,
    )
    assert "destructive (attested by lee)" in render_approval(approval, can_inspect=False)


def test_a_changed_definition_loses_the_attestation(client, alice, reviewer, server):
    _review(client, reviewer, server, attest=["get_ticket"])
    changed = ToolDefinition(
        "get_ticket", "Read one ticket, and mark it read.", annotations={"readOnlyHint": True}
    )
    definitions.store_listing(server, [changed, CLOSE])
    # The approved definition still serves while the change waits, but its hints no longer
    # hold: the server no longer describes the tool as the reviewer attested it.
    assert [d.description for d in definitions.serving(server)][1] == "Read one ticket."
    assert _gate(alice).rules(_call("get_ticket"), TurnState()).behavior == "ask"
    # Approved again without attesting: still asks.
    _review(client, reviewer, server, attest=[])
    assert _gate(alice).rules(_call("get_ticket"), TurnState()).behavior == "ask"


def test_rules_still_win_over_an_attested_hint(client, alice, reviewer, server):
    _review(client, reviewer, server, attest=["get_ticket", "close_ticket"])
    PermissionRule.objects.create(behavior="deny", rule_text="mcp__tickets__get_ticket")
    PermissionRule.objects.create(behavior="allow", rule_text="mcp__tickets__close_ticket")
    gate = _gate(alice)
    denied = gate.rules(_call("get_ticket"), TurnState())
    assert denied.behavior == "deny" and denied.rule is not None
    allowed = gate.rules(_call("close_ticket"), TurnState())
    assert allowed.behavior == "allow" and allowed.rule is not None


def test_mcp_review_attests_the_hints_of_the_hashes_it_approves(reviewer, server):
    row = McpToolDefinition.objects.get(tool="get_ticket")
    call_command(
        "mcp", "review", "tickets", "--approve", "--hash", row.content_hash[:16],
        "--attest-hints", "--as", "lee", stdout=io.StringIO(),
    )  # fmt: skip
    row.refresh_from_db()
    assert (row.status, row.hints_attested_by_name) == ("approved", "lee")
    assert McpToolDefinition.objects.get(tool="close_ticket").status == "pending"


def test_an_approval_card_names_the_server_the_tool_and_what_the_reviewer_approved(
    client, alice, reviewer, server
):
    server.display_name = "Ticket desk"
    server.save()
    _review(client, reviewer, server, attest=["close_ticket"])
    gate = _gate(alice)

    def card(tool: str) -> str:
        approval = Approval.objects.create(
            conversation_id=gate.conversation_id,
            run_id=gate.run_id,
            tool=f"mcp__tickets__{tool}",
            input={"id": "T-1"},
            call_text=f"mcp__tickets__{tool}",
            reason="asked",
        )
        return render_approval(approval, can_inspect=False)

    closing = card("close_ticket")
    assert (
        "<strong>close_ticket</strong> of the MCP server <strong>Ticket desk</strong> (tickets)"
        in closing
    )
    assert "Close a ticket for good." in closing
    assert "destructiveHint: true (attested by lee)" in closing
    # Not attested: said so, the hint shown as the server's claim.
    reading = card("get_ticket")
    assert "Read one ticket." in reading
    assert "readOnlyHint: true (the server's claim, not attested)" in reading
    # A change waiting for review: the card shows what was approved, not the new words.
    definitions.store_listing(server, [ToolDefinition("get_ticket", "Read and delete."), CLOSE])
    assert "Read one ticket." in card("get_ticket")
    assert "Read and delete." not in card("get_ticket")
