"""Issue 23, Medium: the rule tester replayed hidden text, and every page built from stored calls.

The attack: a Write call whose content quoted 121 characters of a skill body was withheld on the
approval's own page, but `/admin/skills_app/permissionrule/test/?approval=<id>` showed it
verbatim to staff without the inspect permission. Every replay and every audit or admin page
that shows a stored tool input now goes through the conversation's outbound filter for such
staff; the decision itself is still made on the real input. Positive controls: an inspector sees
the call as it was, and the decision is the same for both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from skills_app.models import (
    Approval,
    Conversation,
    PermissionRule,
    Run,
    RunEvent,
    SkillInvocation,
)
from tests.security.helpers import client_of, leaked

BODY = (
    "Weigh the saffron on the brass scale and never tell a buyer the harvest came from "
    "the northern terraces below the old monastery wall.\n"
)
QUOTE = BODY[:121]
TESTER = "/admin/skills_app/permissionrule/test/"


@pytest.fixture
def staff(django_user_model) -> Any:
    """Staff with every view permission (the audit and the rule tester), but not inspect."""
    user = django_user_model.objects.create_user("stan", password="stan-pass-123", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="skills_app", codename__startswith="view_"
        )
    )
    return user


@pytest.fixture
def world(alice, settings, tmp_path: Path) -> dict[str, Any]:
    """A conversation in which a skill with BODY was loaded, a Write quoting it asked, and a
    Bash call quoting it ran under the skill (recorded for the audit, not hidden)."""
    root = tmp_path / "skills"
    (root / "saffron").mkdir(parents=True)
    (root / "saffron" / "SKILL.md").write_text(
        f"---\nname: saffron\ndescription: Spice stock.\n---\n{BODY}"
    )
    settings.SKILLS_DIRS = [root]
    conversation = Conversation.objects.create(owner=alice, title="spice")
    run = Run.objects.create(conversation=conversation, status=Run.DONE)
    invocation = SkillInvocation.objects.create(
        conversation=conversation,
        run=run,
        skill="saffron",
        caller="model",
        decision="allowed",
        injected_text=BODY,
    )
    write = {"file_path": "out/notes.md", "content": f"Notes: {QUOTE}"}
    approval = Approval.objects.create(
        conversation=conversation,
        run=run,
        tool="Write",
        skill="saffron",
        input=write,
        call_text=f"Write(./out/notes.md) with: {QUOTE}",
        reason=f"no rule allows writing {QUOTE}",
        status=Approval.DENY,
        answered_by=alice,
    )
    event = RunEvent.objects.create(
        conversation=conversation,
        run=run,
        seq=1,
        type="audit.tool",
        data={
            "tool": "Bash",
            "input": {"command": f"echo '{QUOTE}' > out/x.txt"},
            "decision": "allow",
            "reason": "allowed-tools of the skill",
            "invocation_id": invocation.pk,
            "tool_use_id": "toolu_1",
        },
    )
    return {"approval": approval, "event": event, "invocation": invocation}


def _pages(world: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    approval, event, invocation = world["approval"], world["event"], world["invocation"]
    return [
        (TESTER, {"approval": approval.pk}),
        (TESTER, {"event": event.pk}),
        (reverse("admin:skills_app_approval_changelist"), {}),
        (reverse("admin:skills_app_approval_change", args=[approval.pk]), {}),
        (reverse("audit-home"), {}),
        (reverse("audit-invocations"), {}),
        (reverse("audit-invocation", args=[invocation.pk]), {}),
        (reverse("audit-export-csv"), {}),
    ]


@pytest.mark.django_db
def test_no_replay_or_audit_page_shows_the_quote_to_staff_without_inspect(staff, world):
    client = client_of(staff)
    for url, params in _pages(world):
        response = client.get(url, params)
        assert response.status_code == 200, (url, params, response.status_code)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert leaked(body, [BODY]) == [], (url, params, leaked(body, [BODY]))
    shown = client.get(TESTER, {"approval": world["approval"].pk})
    assert b"withheld" in shown.content
    assert shown.context["result"].decision.behavior == "ask"  # decided on the real input


@pytest.mark.django_db
def test_an_inspector_replays_the_call_as_it_was(auditor, world):
    client = client_of(auditor)
    response = client.get(TESTER, {"approval": world["approval"].pk})
    assert response.status_code == 200 and QUOTE[:80].encode() in response.content
    assert response.context["result"].decision.behavior == "ask"
    event = client.get(TESTER, {"event": world["event"].pk})
    assert QUOTE[:80].encode() in event.content


@pytest.mark.django_db
def test_the_decision_is_made_on_the_real_input_for_both(staff, auditor, world):
    PermissionRule.objects.create(behavior="deny", rule_text="Bash(echo *)")
    for user in (staff, auditor):
        response = client_of(user).get(TESTER, {"event": world["event"].pk})
        assert response.context["result"].decision.behavior == "deny"


@pytest.mark.django_db
def test_submitting_the_shown_form_does_not_bring_the_text_back(staff, world):
    """The form the staff member gets carries the placeholder, not the quote."""
    client = client_of(staff)
    shown = client.get(TESTER, {"event": world["event"].pk})
    call = shown.context["tester_form"].initial["call"]
    assert QUOTE[:60] not in call and "withheld" in call
    again = client.get(TESTER, {"call": call, "skill": "saffron"})
    assert again.status_code == 200 and leaked(again.content, [BODY]) == []


@pytest.mark.django_db
def test_a_quote_of_the_owners_personal_skill_is_theirs_not_staffs(alice, staff, world):
    from skills_app import visibility
    from skills_app.registry.uploads import install_archive
    from tests.support.upload_helpers import make_zip

    mine = "Alice's own recipe: toast the cumin seeds for exactly ninety seconds, then grind.\n"
    install_archive(
        make_zip({"SKILL.md": f"---\nname: cumin\ndescription: Mine.\n---\n{mine}"}),
        "cumin.zip",
        user=alice,
        personal=True,
    )
    approval = world["approval"]
    Approval.objects.filter(pk=approval.pk).update(input={"file_path": "out/r.md", "content": mine})
    client = client_of(staff)
    for url in (
        f"{TESTER}?approval={approval.pk}",
        reverse("admin:skills_app_approval_change", args=[approval.pk]),
    ):
        assert leaked(client.get(url).content, [mine]) == [], url
    # Positive control: the owner's own view of her conversation shows her text as written.
    conversation_id = approval.conversation_id
    assert visibility.outbound(conversation_id, can_inspect=False).text(mine) == mine
