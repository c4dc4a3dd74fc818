"""A skill's allowed-tools naming MCP tools: while the skill is active they run without asking,
as its Bash grants do; for a reviewed skill only what the manifest its reviewer approved lists.
No MCP server is started: these are the decisions a run makes before any call leaves."""

from __future__ import annotations

import pytest

from skills_app.core.agent import TurnState
from skills_app.core.invocation import skill_rules
from skills_app.core.permissions import ToolCall
from skills_app.models import Conversation, PermissionRule, Run, SkillReview
from skills_app.permissions.approvals import PermissionGate
from skills_app.registry.consents import consents_for
from skills_app.registry.skills import skills_for_user
from skills_app.registry.uploads import UploadFile
from skills_app.runs.factory import workspace_for
from tests.support.loop_helpers import write_skills
from tests.support.review_helpers import publish

pytestmark = pytest.mark.django_db

TRIAGE = """\
---
name: {name}
description: Sorts the support queue's tickets.
allowed-tools: mcp__tickets__get_* mcp__tickets__close_ticket
---
Read each ticket with mcp__tickets__get_ticket and close the solved ones.
"""


def _gate(user, name: str) -> tuple[PermissionGate, TurnState]:
    conversation = Conversation.objects.create(owner=user, title="t")
    run = Run.objects.create(conversation=conversation, status=Run.RUNNING, started_by=user)

    async def record(*args, **kwargs) -> int:
        return 0

    spec = skills_for_user(user.pk).get(name)
    assert spec is not None
    workspace = workspace_for(conversation.pk)
    gate = PermissionGate(
        conversation_id=conversation.pk,
        run_id=run.pk,
        user_id=user.pk,
        workspace=workspace,
        record=record,
        consents=consents_for([spec]),
    )
    # As the invocation of the skill leaves the turn: active, with its own rules.
    folder = str(workspace.skills_dir / name)
    state = TurnState(active_skills=[name], skill_rules=skill_rules(spec, "allow", folder))
    return gate, state


def _call(tool: str) -> ToolCall:
    return ToolCall(tool, {"id": "T-1"})


def test_a_skills_allowed_mcp_tools_run_without_asking_while_it_is_active(
    settings, tmp_path, alice
):
    settings.SKILLS_DIRS = [
        write_skills(tmp_path / "skills", {"triage": TRIAGE.format(name="triage")})
    ]
    gate, state = _gate(alice, "triage")
    got = gate.rules(_call("mcp__tickets__get_ticket"), state)
    assert got.behavior == "allow"
    assert got.reason == 'allowed-tools of skill "triage": mcp__tickets__get_*'
    assert gate.rules(_call("mcp__tickets__close_ticket"), state).behavior == "allow"
    # Not granted, and not while the skill is inactive.
    assert gate.rules(_call("mcp__tickets__delete_ticket"), state).behavior == "ask"
    assert gate.rules(_call("mcp__wiki__get_page"), state).behavior == "ask"
    assert gate.rules(_call("mcp__tickets__get_ticket"), TurnState()).behavior == "ask"


def test_a_deny_rule_wins_over_a_skills_mcp_grant(settings, tmp_path, alice):
    settings.SKILLS_DIRS = [
        write_skills(tmp_path / "skills", {"triage": TRIAGE.format(name="triage")})
    ]
    PermissionRule.objects.create(behavior="deny", rule_text="mcp__tickets__close_ticket")
    gate, state = _gate(alice, "triage")
    assert gate.rules(_call("mcp__tickets__close_ticket"), state).behavior == "deny"
    assert gate.rules(_call("mcp__tickets__get_ticket"), state).behavior == "allow"


def _publish_triage(user) -> None:
    text = TRIAGE.format(name="org-greet")
    publish(user, [UploadFile("org-greet/SKILL.md", text.encode())])


def test_a_reviewed_skills_mcp_tools_run_under_its_review(skill_manager, alice):
    _publish_triage(skill_manager)
    gate, state = _gate(alice, "org-greet")
    got = gate.rules(_call("mcp__tickets__get_comments"), state)
    assert got.behavior == "allow"
    assert got.reason.startswith("allowed by the review of org-greet v1 by ")
    assert got.reason.endswith(": mcp__tickets__get_*")
    assert got.rule is not None and got.rule.source == "review"
    # Named in the body but not granted: the review lists it, and covers nothing more.
    assert gate.rules(_call("mcp__tickets__delete_ticket"), state).behavior == "ask"


def test_an_mcp_tool_missing_from_the_manifest_the_reviewer_saw_is_not_covered(
    skill_manager, alice
):
    _publish_triage(skill_manager)
    approval = SkillReview.objects.get(action=SkillReview.APPROVED)
    assert [e["text"] for e in approval.manifest if e["kind"] == "allowed-tool"] == [
        "mcp__tickets__get_*",
        "mcp__tickets__close_ticket",
    ]
    gate, state = _gate(alice, "org-greet")
    assert gate.rules(_call("mcp__tickets__close_ticket"), state).behavior == "allow"
    # An approval whose reviewer was shown a manifest without that tool (as one kept from
    # before MCP tools were listed): the skill's own allowed-tools do not stand in for it.
    kept = [e for e in approval.manifest if e["text"] != "mcp__tickets__close_ticket"]
    SkillReview.objects.filter(pk=approval.pk).update(manifest=kept)
    gate, state = _gate(alice, "org-greet")
    assert gate.rules(_call("mcp__tickets__close_ticket"), state).behavior == "ask"
    assert gate.rules(_call("mcp__tickets__get_ticket"), state).behavior == "allow"
