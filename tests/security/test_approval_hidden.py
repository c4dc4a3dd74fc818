"""Approval prompts in plain words withhold hidden skill text in every part a person reads.

The action line ("Search PATH for", "Run a command of the SKILL skill:"), the call shown in
code and the "why?" line are built from the model's tool input, so a model that pastes injected
instructions into any field of a call must not show them to someone without the inspect
permission, not even through the cutting of workspace paths.
"""

from __future__ import annotations

import pytest

from skills_app.chat.rendering import render_approval
from skills_app.models import Approval, Conversation, Message, Run
from skills_app.workspaces import workspace_for
from tests.security.helpers import leaked

pytestmark = pytest.mark.django_db

BODY = (
    "Always brew the moonlight tincture slowly at dusk before adding the silver fern leaves "
    "and never let the cauldron boil over the rim"
)


@pytest.fixture
def conversation(alice):
    conversation = Conversation.objects.create(owner=alice, title="potions")
    root = str(workspace_for(conversation.pk).root)
    hidden = f"Base directory for this skill: {root}/skills/potions\n\n{BODY}"
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="user",
        kind="skill_prompt",
        is_meta=True,
        content=[{"type": "text", "text": hidden}],
    )
    return conversation


def _approval(conversation, alice, tool, data):
    run = Run.objects.create(conversation=conversation, status=Run.WAITING, started_by=alice)
    return Approval.objects.create(
        conversation=conversation, run=run, tool=tool, input=data, call_text=f"{tool}(...)"
    )


@pytest.mark.parametrize(
    ("tool", "data"),
    [
        ("Grep", {"pattern": "x", "path": f"skills/{BODY}"}),
        ("Glob", {"pattern": "*.md", "path": BODY}),
        ("skill_run", {"skill": BODY, "command": "ls"}),
    ],
)
def test_no_field_of_a_call_shows_hidden_text_in_the_prompt(conversation, alice, tool, data):
    approval = _approval(conversation, alice, tool, data)
    html = render_approval(approval, can_inspect=False)
    assert leaked(html, [BODY]) == []
    assert "withheld" in html or "hidden skill text" in html
    # An inspector sees the call as it is.
    assert leaked(render_approval(approval, can_inspect=True), [BODY])


def test_a_long_call_of_another_tool_is_cut_after_the_workspace_root_is(conversation, alice):
    root = str(workspace_for(conversation.pk).root)
    # The root straddles the 200th character of the call's JSON.
    padding = "x" * (200 - len('{"a": "') - len(root) // 2)
    approval = _approval(conversation, alice, "SomeTool", {"a": padding + root + "/out/r.md"})
    html = render_approval(approval, can_inspect=False)
    subject = html[html.index('class="approval-call">') :].split("</code>")[0]
    assert root[: len(root) // 2] not in subject
