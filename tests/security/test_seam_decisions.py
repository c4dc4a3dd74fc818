"""Seams of the decisions audit (#25) with hidden text (#23) and personal skills.

`/audit/decisions/` and the admin's raw table show every recorded permission decision. Attacks,
as staff who may view the audit but lack "inspect injected content":
- a call that quoted the conversation owner's *personal* skill: staff are not its owner, so it
  is hidden from them (the page filtered as if they were the owner);
- the rule of a decision the review allowed: `Bash(<the reviewed command>)`, copied from the
  skill's body, shown unfiltered on the page and in the admin (and searchable there);
- the page's "Call contains" and "Rule contains" filters: their result count reads hidden text
  one guess at a time;
- an ordinary user opening the page at all.
Positive controls: an inspector sees the calls and rules whole, and filters by them.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.urls import reverse

from skills_app.models import Conversation, PermissionDecision
from skills_app.registry import uploads
from skills_app.visibility import forget
from tests.security.helpers import client_of, leaked
from tests.support.loop_helpers import run_turn, use_fake_model
from tests.support.review_helpers import GREET_SKILL_MD, publish

PERSONAL_BODY = (
    "Copy the ledger totals into the quarterly sheet, then tell nobody that the vault code "
    "is kept under the third drawer of the walnut desk.\n"
)
QUOTE = PERSONAL_BODY[:90]
REVIEWED_COMMAND = 'python3 ${CLAUDE_SKILL_DIR}/scripts/greet.py "$ARGUMENTS"'


@pytest.fixture
def staff(django_user_model) -> Any:
    """Staff with every view permission (the audit included), but not inspect."""
    user = django_user_model.objects.create_user("stan", password="stan-pass-123", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="skills_app", codename__startswith="view_"
        )
    )
    return user


def _personal_skill(owner: Any, root) -> None:
    folder = root / "ledger-notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: ledger-notes\ndescription: My own ledger notes.\n---\n" + PERSONAL_BODY
    )
    uploads.install_directory(folder, user=owner, personal=True)


def _quoting_decision(owner: Any) -> PermissionDecision:
    conversation = Conversation.objects.create(owner=owner, title="ledger")
    return PermissionDecision.objects.create(
        conversation=conversation,
        tool="Bash",
        call_text=f"Bash(echo '{QUOTE}' > out/notes.txt)",
        input={"command": f"echo '{QUOTE}' > out/notes.txt"},
        decision="allow",
        source=PermissionDecision.Source.USER,
        reason="approved once by bob",
        skill="ledger-notes",
    )


@pytest.mark.django_db
def test_staff_do_not_read_an_owners_personal_skill_in_the_decisions(staff, auditor, bob, tmp_path):
    _personal_skill(bob, tmp_path / "mine")
    row = _quoting_decision(bob)
    forget(row.conversation_id)
    page = client_of(staff).get(reverse("audit-decisions"))
    assert page.status_code == 200
    html = page.content.decode()
    assert f'id="decision-{row.pk}"' in html
    assert leaked(html, [PERSONAL_BODY]) == [], leaked(html, [PERSONAL_BODY])
    assert "withheld" in html
    # The raw table in the admin agrees.
    admin = client_of(staff).get(
        reverse("admin:skills_app_permissiondecision_change", args=[row.pk])
    )
    assert admin.status_code == 200
    assert leaked(admin.content, [PERSONAL_BODY]) == []
    # Positive control: an inspector reads the call whole.
    inspected = client_of(auditor).get(reverse("audit-decisions")).content.decode()
    assert QUOTE.replace("'", "&#x27;") in inspected or QUOTE in inspected


@pytest.mark.django_db
def test_the_call_and_rule_filters_are_no_oracle_for_staff(staff, auditor, bob, tmp_path):
    _personal_skill(bob, tmp_path / "mine")
    _quoting_decision(bob)
    right = {"call": "then tell nobody that the vault"}
    wrong = {"call": "then tell everybody that the vault"}
    for query in (right, wrong, {"rule": "third drawer"}):
        response = client_of(staff).get(reverse("audit-decisions"), query)
        html = response.content.decode()
        # Either refused for everyone without the permission, or blind: the same answer for
        # a right and a wrong guess. Here: refused, saying why.
        assert response.status_code == 400, (query, response.status_code)
        assert "inspect" in html
    # Positive control: an inspector filters by the call.
    found = client_of(auditor).get(reverse("audit-decisions"), right).content.decode()
    assert "1 decision." in found
    missed = client_of(auditor).get(reverse("audit-decisions"), wrong).content.decode()
    assert "0 decisions." in missed


@pytest.mark.django_db
def test_an_ordinary_user_cannot_open_the_decisions(alice, skill_manager):
    for user in (alice, skill_manager):
        assert client_of(user).get(reverse("audit-decisions")).status_code == 403


@pytest.mark.django_db(transaction=True)
async def test_the_rule_a_review_allowed_by_does_not_show_the_skills_command(
    settings, fake_anthropic, skill_manager, alice, staff, auditor
):
    from tests.registry.test_review_consent_runs import follow

    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = []
    await sync_to_async(publish)(skill_manager)
    conversation = await Conversation.objects.acreate(owner=alice, title="greet")
    fake_anthropic.set_responder(follow())
    await run_turn(conversation, "/org-greet Ada Lovelace", alice, answer="deny")
    row = await PermissionDecision.objects.aget(conversation=conversation, tool="Bash")
    assert row.source == "review" and REVIEWED_COMMAND in row.rule_text  # the stored row
    hidden = [textwrap.dedent(GREET_SKILL_MD)]
    staff_client = await sync_to_async(client_of)(staff)
    page = await sync_to_async(staff_client.get)(reverse("audit-decisions"))
    assert page.status_code == 200
    assert leaked(page.content, hidden) == [], leaked(page.content, hidden)
    admin_page = await sync_to_async(staff_client.get)(
        reverse("admin:skills_app_permissiondecision_change", args=[row.pk])
    )
    assert leaked(admin_page.content, hidden) == []
    # Searching the raw table by the rule's text is an oracle too: refused or blind.
    listing = await sync_to_async(staff_client.get)(
        reverse("admin:skills_app_permissiondecision_changelist"), {"q": "scripts/greet.py"}
    )
    assert "1 result" not in listing.content.decode() or listing.status_code == 400
    # Positive control: an inspector sees the rule exactly.
    inspector = await sync_to_async(client_of)(auditor)
    inspected = await sync_to_async(inspector.get)(reverse("audit-decisions"))
    assert "scripts/greet.py &quot;$ARGUMENTS&quot;" in inspected.content.decode()


@pytest.mark.django_db
def test_the_review_pages_refusals_show_a_skill_manager_no_other_hidden_text(
    skill_manager, bob, tmp_path
):
    """A refusal is recorded under the skill active in the turn, but the call it refused may
    quote any hidden text of that conversation: here the owner's personal skill. The review
    page lists refusals for skill managers, who read the reviewed package, not everyone's."""
    version = publish(skill_manager)
    _personal_skill(bob, tmp_path / "mine")
    conversation = Conversation.objects.create(owner=bob, title="greet")
    row = PermissionDecision.objects.create(
        conversation=conversation,
        tool="Bash",
        call_text=f"Bash(echo '{QUOTE}' > out/copy.txt)",
        input={"command": f"echo '{QUOTE}' > out/copy.txt"},
        decision=PermissionDecision.REFUSED,
        source=PermissionDecision.Source.HIDDEN,
        reason="this command quotes the skill's instructions",
        skill="org-greet",
    )
    forget(conversation.pk)
    page = client_of(skill_manager).get(reverse("skill-review", args=[version.pk]))
    html = page.content.decode()
    assert 'id="refusals"' in html and "out/copy.txt" in html  # the attempt is listed
    assert leaked(html, [PERSONAL_BODY]) == [], leaked(html, [PERSONAL_BODY])
    assert row.pk


@pytest.mark.django_db
def test_an_uploader_who_lost_the_role_reads_no_newer_version_through_the_review_page(
    skill_manager, django_user_model
):
    """The review page is open to skill managers and to a version's uploader. An uploader who
    is no longer a skill manager kept reading, through the diff against the active version,
    every later version others uploaded."""
    from skills_app.accounts import roles
    from tests.support.review_helpers import GREET_MARKER, greet_files, publish

    rita = django_user_model.objects.create_user("rita", password="rita-pass-123")
    roles.grant(rita, roles.get_role("skill-manager"))
    old = publish(skill_manager)
    newer = "NEWER-9b2e: greet the person twice and then recite the quarterly figures in full"
    files = greet_files(
        skill_md=GREET_SKILL_MD.replace(GREET_MARKER, newer), script="print('v2')\n"
    )
    publish(rita, files)  # v2 is live, uploaded and reviewed by rita
    roles.revoke(skill_manager, roles.get_role("skill-manager"))
    skill_manager.refresh_from_db()
    page = client_of(skill_manager).get(reverse("skill-review", args=[old.pk]))
    html = page.content.decode() if page.status_code == 200 else ""
    assert newer not in html and "print(&#x27;v2&#x27;)" not in html
    assert leaked(html, [newer]) == []
    # Positive control: a skill manager reads the diff with the newer version.
    managed = client_of(rita).get(reverse("skill-review", args=[old.pk])).content.decode()
    assert "NEWER-9b2e" in managed


@pytest.mark.django_db
def test_a_versions_frontmatter_in_the_admin_is_skill_md_too(staff, skill_manager):
    """SKILL.md is withheld in the admin from staff without the inspect permission; its parsed
    frontmatter (hooks' commands, arbitrary metadata) was shown beside it."""
    from tests.support.review_helpers import greet_files, upload_draft

    secret = "FRONTMATTER-SECRET-51aa: the vault opens with the brass key kept in the clock"
    skill_md = GREET_SKILL_MD.replace(
        "argument-hint:", f'metadata:\n  note: "{secret}"\nargument-hint:'
    )
    version = upload_draft(skill_manager, greet_files(skill_md=skill_md))
    assert secret in str(version.frontmatter)  # the stored row holds it
    page = client_of(staff).get(reverse("admin:skills_app_skillversion_change", args=[version.pk]))
    assert page.status_code == 200
    assert leaked(page.content, [secret]) == [], leaked(page.content, [secret])


@pytest.mark.django_db
def test_an_invocations_allowed_tools_and_model_args_are_filtered_for_staff(
    staff, auditor, skill_manager, bob
):
    """What a reviewed skill's invocation applied (its `allowed-tools`, exactly as SKILL.md has
    them) and the arguments the model wrote (it may quote what it read) are shown on the audit's
    invocation page and in the admin; both pass the filter for staff without inspect."""
    from skills_app.models import SkillInvocation

    version = publish(skill_manager)
    conversation = Conversation.objects.create(owner=bob, title="greet")
    allowed = "Bash(python3 ${CLAUDE_SKILL_DIR}/scripts/greet.py --version)"
    model_args = "GREETBODY-7c1e: greet every person by the exact name they give and add"
    inv = SkillInvocation.objects.create(
        conversation=conversation,
        skill="org-greet",
        caller="model",
        decision="allowed",
        version=version,
        digest=version.digest,
        args=model_args,
        allowed_tools=[allowed],
        injected_text="x",
    )
    forget(conversation.pk)
    hidden = [GREET_SKILL_MD]
    for url in (
        reverse("audit-invocation", args=[inv.pk]),
        reverse("admin:skills_app_skillinvocation_change", args=[inv.pk]),
        reverse("admin:skills_app_skillinvocation_changelist"),
    ):
        page = client_of(staff).get(url)
        assert page.status_code == 200, url
        assert leaked(page.content, hidden) == [], (url, leaked(page.content, hidden))
    # Positive control: an inspector reads them whole.
    inspected = client_of(auditor).get(reverse("audit-invocation", args=[inv.pk])).content
    assert b"scripts/greet.py --version" in inspected and b"GREETBODY-7c1e" in inspected
