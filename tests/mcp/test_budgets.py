"""MCP calls count against the spending limits (docs/mcp.md "Quota and budgets").

A server's `call_cost_usd` is what each call of its tools counts against the person's and their
groups' limits: a call that ran is charged, one that would not fit in what is left is refused
before it leaves (checked on the toy server's side), and the usage page shows the calls and what
they counted.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.db.models import Sum
from django.test import Client
from django.urls import reverse

from skills_app.models import (
    AuditEvent,
    Conversation,
    PermissionDecision,
    PermissionRule,
    SpendCounter,
    SpendReservation,
    UserPolicy,
)
from skills_app.workspaces import workspace_for
from tests.mcp.test_filter import _results
from tests.mcp.test_mcp import http_server_named, listed_and_approved, place_in
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import run_turn, use_fake_model


def _usage_page(user) -> str:
    client = Client()
    client.force_login(user)
    return client.get(reverse("my-usage")).content.decode()


@pytest.mark.django_db(transaction=True)
async def test_a_call_is_charged_and_one_past_the_limit_never_leaves(
    alice, bob, settings, fake_anthropic, http_server
):
    use_fake_model(settings, fake_anthropic, retries=0)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy")
    # Room for one $100 call and the turn's own model calls, not for two calls.
    await UserPolicy.objects.acreate(user=alice, daily_limit_usd=Decimal("150"))
    conversation = await Conversation.objects.acreate(owner=alice, title="costly")
    server = await sync_to_async(http_server_named)(
        bob, http_server, everyone=True, call_cost_usd=Decimal("100")
    )
    await listed_and_approved(server, place_in(workspace_for(conversation.pk).root), alice)
    fake_anthropic.enqueue(
        Reply.tool_use("mcp__toy__touch_marker", {"label": "first"}),
        Reply.tool_use("mcp__toy__touch_marker", {"label": "second"}),
        Reply.text("done"),
    )
    run = await run_turn(conversation, "touch twice", alice)
    assert run.status == "done"
    # Checked on the server's side: the first call ran, the second never reached it.
    assert (http_server.folder / "marker-first").exists()
    assert not (http_server.folder / "marker-second").exists()
    results = await sync_to_async(_results)(conversation)
    refused = json.dumps(results[-1]["content"])
    assert results[-1]["is_error"] is True and "spending limit" in refused
    decisions = [
        (d.decision, d.reason)
        async for d in PermissionDecision.objects.filter(conversation=conversation).order_by("pk")
    ]
    assert decisions[0][0] == "allow"
    assert decisions[1][0] == "refused" and "$100.00" in decisions[1][1]
    # The call that ran was charged once, on the person's counters, and the audit says so.
    charged = SpendReservation.objects.filter(user=alice, purpose="mcp")
    assert await charged.acount() == 1
    assert (await charged.aaggregate(s=Sum("actual_usd")))["s"] == Decimal("100")
    day = await SpendCounter.objects.aget(scope="user", scope_id=alice.pk, period="day")
    assert day.spent_usd >= Decimal("100") and day.reserved_usd == 0
    called = [e.detail async for e in AuditEvent.objects.filter(action="mcp.called")]
    assert [d["cost_usd"] for d in called] == ["100.0000"]
    page = await sync_to_async(_usage_page)(alice)
    assert "This month you made 1 call to MCP servers' tools, which counted $100.00" in page


@pytest.mark.django_db(transaction=True)
async def test_a_server_without_a_cost_charges_nothing(
    alice, bob, settings, fake_anthropic, http_server
):
    use_fake_model(settings, fake_anthropic, retries=0)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__toy")
    await UserPolicy.objects.acreate(user=alice, daily_limit_usd=Decimal("150"))
    conversation = await Conversation.objects.acreate(owner=alice, title="free")
    server = await sync_to_async(http_server_named)(bob, http_server, everyone=True)
    await listed_and_approved(server, place_in(workspace_for(conversation.pk).root), alice)
    fake_anthropic.enqueue(
        Reply.tool_use("mcp__toy__touch_marker", {"label": "free"}), Reply.text("done")
    )
    assert (await run_turn(conversation, "touch", alice)).status == "done"
    assert (http_server.folder / "marker-free").exists()
    assert not await SpendReservation.objects.filter(purpose="mcp").aexists()
    page = await sync_to_async(_usage_page)(alice)
    assert "This month you made 1 call to MCP servers' tools." in page
