"""Issue 42, point 14: a read-only link to a conversation shows it for the VIEWER's visibility
class, through the chat's outbound filter; revoked, expired and unknown links show nothing.

The world: alice's conversation loaded her personal skill "alice-ledger" (bob may not see it),
whose injected text is hidden; the model then ran a command quoting that text and read it back;
alice attached a file. Bob (no inspect permission) opens alice's link: nothing of 40 characters
or more of the hidden text, the skill's name or the attached file's body reaches him, in the
page, its head or a HEAD answer. Positive control: an auditor (inspect permission) opening the
same link is shown the hidden text, so the check can see it when it is there.
"""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from skills_app.core.transcript import status_message_text
from skills_app.models import (
    Attachment,
    AuditEvent,
    Conversation,
    ConversationShare,
    Message,
    Run,
    SkillInvocation,
    SkillPackage,
    SkillVersion,
)
from skills_app.workspaces import workspace_for
from tests.security.helpers import leaked

pytestmark = pytest.mark.django_db

SKILL = "alice-ledger"
BODY = (
    "Open the quarterly ledger only with the brass key from the second drawer.\n"
    "Report the regional totals but never the names on the customer sheet.\n"
)
INJECTED = f"Base directory for this skill: /skills/{SKILL}\n\n{BODY}"
FILE_BODY = b"Attached: the salaries of the whole finance team, by name and month.\n"
COMMAND = "echo 'Open the quarterly ledger only with the brass key from the second drawer.'"


def _client(user) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.fixture
def shared(alice, tmp_path) -> Conversation:
    """Alice's conversation with a hidden skill prompt, a command and a result quoting it, a file."""
    conversation = Conversation.objects.create(owner=alice, title="Quarter close")
    run = Run.objects.create(conversation=conversation, status=Run.DONE, model="claude-test")
    package = SkillPackage.objects.create(name=SKILL, owner=alice)
    skill_md = f"---\nname: {SKILL}\ndescription: Closes the quarter.\n---\n{BODY}"
    (tmp_path / "storage" / SKILL).mkdir(parents=True)
    (tmp_path / "storage" / SKILL / "SKILL.md").write_text(skill_md)
    version = SkillVersion.objects.create(
        package=package,
        digest="1" * 64,
        number=1,
        storage_path=str(tmp_path / "storage" / SKILL),
        skill_md=skill_md,
        frontmatter={"name": SKILL, "description": "Closes the quarter."},
        uploaded_by=alice,
    )
    package.active_version = version
    package.save()
    invocation = SkillInvocation.objects.create(
        conversation=conversation,
        run=run,
        skill=SKILL,
        source="personal",
        caller="user",
        args="Q3",
        decision="allowed",
        decided_by="rule",
        status_text=status_message_text(SKILL, "Q3"),
        injected_text=INJECTED,
    )
    data = workspace_for(conversation.pk).save_input("salaries.txt", FILE_BODY)
    attachment = Attachment.objects.create(
        conversation=conversation,
        owner=alice,
        name=data.removeprefix("in/"),
        path=data,
        media_type="text/plain",
        size=len(FILE_BODY),
        sha256=hashlib.sha256(FILE_BODY).hexdigest(),
    )
    bash = {"type": "tool_use", "id": "toolu_share_bash", "name": "Bash"}
    skill_call = {"type": "tool_use", "id": "toolu_share_skill", "name": "Skill"}
    rows = [
        ("user", "text", False, [{"type": "text", "text": "Close the quarter, please."}]),
        ("user", "attachments", False, [{"type": "text", "text": "[attached salaries.txt]"}]),
        (
            "user",
            "skill_status",
            False,
            [{"type": "text", "text": status_message_text(SKILL, "Q3")}],
        ),
        ("user", "skill_prompt", True, [{"type": "text", "text": INJECTED}]),
        ("assistant", "tool_use", False, [{**bash, "input": {"command": COMMAND}}]),
        (
            "user",
            "tool_result",
            False,
            [{"type": "tool_result", "tool_use_id": "toolu_share_bash", "content": BODY}],
        ),
        # A second call of the skill, refused: its chip names the skill unless withheld.
        (
            "assistant",
            "tool_use",
            False,
            [{**skill_call, "input": {"skill": SKILL, "args": "Q4-ledger-args"}}],
        ),
        ("assistant", "text", False, [{"type": "text", "text": "The quarter is closed."}]),
        # The model's prose quoting the hidden text, and the owner's words quoting it (alice
        # could have read it as an inspector): the chat shows both to her as written.
        ("assistant", "text", False, [{"type": "text", "text": f"As told: {BODY}"}]),
        ("user", "text", False, [{"type": "text", "text": f"Note: {BODY.splitlines()[1]}"}]),
    ]
    for seq, (role, kind, is_meta, content) in enumerate(rows, start=1):
        Message.objects.create(
            conversation=conversation,
            seq=seq,
            role=role,
            kind=kind,
            is_meta=is_meta,
            content=content,
            run=run,
            invocation=invocation if kind.startswith("skill") else None,
            meta={
                "attachments": [
                    {"id": attachment.pk, "name": attachment.name, "size": len(FILE_BODY)}
                ]
            }
            if kind == "attachments"
            else {"skill": SKILL}
            if kind == "skill_prompt"
            else {},
        )
    return conversation


def _share(client: Client, conversation: Conversation, days: str = "7") -> str:
    """Make a link as the owner; the token from the page (shown once)."""
    response = client.post(reverse("conversation-shares", args=[conversation.pk]), {"days": days})
    assert response.status_code == 200
    found = re.search(r'value="https?://[^/]+/s/([A-Za-z0-9_-]+)/"', response.content.decode())
    assert found, "the new link is on the page"
    return found.group(1)


def _texts_bob_must_not_get() -> list[str]:
    return [BODY, INJECTED, COMMAND, FILE_BODY.decode()]


def test_a_non_inspector_viewer_never_receives_hidden_text_skill_or_file(alice, bob, shared):
    token = _share(_client(alice), shared)
    viewer = _client(bob)
    url = reverse("shared-conversation", args=[token])

    page = viewer.get(url)
    body = page.content.decode()
    assert page.status_code == 200
    assert leaked(body, _texts_bob_must_not_get()) == []
    # The status chips are there, the skill's name and the refused call's arguments are not.
    assert "A skill you cannot see was used here (withheld)" in body
    assert SKILL not in body
    assert "Q4-ledger-args" not in body  # (a plain "Q4" turns up in random CSRF tokens)
    assert "The quarter is closed." in body
    assert "Close the quarter, please." in body
    # Read-only: no socket, no composer, no form that posts anywhere but the viewer's own theme
    # (the settings menu of every page) and sign-out.
    assert "ws-connect" not in body
    assert "<textarea" not in body
    forms = re.findall(r'<form[^>]*action="([^"]*)"', body)
    assert sorted(forms) == sorted([reverse("preferences-theme"), reverse("logout")])
    # Nothing for a link preview or a crawler; the token never leaves as a Referer.
    head = body.split("</head>")[0]
    assert '<meta name="robots" content="noindex, nofollow">' in head
    assert "og:" not in head and "twitter:" not in head
    assert page["Referrer-Policy"] == "no-referrer"
    assert "no-store" in page["Cache-Control"]
    # HEAD answers without a body; the links the page holds give bob nothing either.
    head_answer = viewer.head(url)
    assert head_answer.status_code == 200 and head_answer.content == b""
    for link in set(re.findall(r'href="(/c/[^"]+)"', body)):
        followed = viewer.get(link)
        assert followed.status_code == 404, link
        assert leaked(followed.content, _texts_bob_must_not_get()) == []


def test_an_inspector_viewer_sees_what_the_audit_shows(alice, auditor, shared):
    token = _share(_client(alice), shared)

    body = _client(auditor).get(reverse("shared-conversation", args=[token])).content.decode()

    # The positive control of the test above: the hidden prompt and the command are on the page.
    assert leaked(body, [BODY]) != []
    assert COMMAND.split("'")[1] in body
    assert f'The "{SKILL}" skill' in body


def test_making_opening_and_revoking_a_link_are_in_the_audit(alice, bob, shared):
    owner = _client(alice)
    token = _share(owner, shared)
    share = ConversationShare.objects.get(conversation=shared)
    _client(bob).get(reverse("shared-conversation", args=[token]))

    owner.post(reverse("conversation-share-revoke", args=[shared.pk, share.pk]))

    rows = AuditEvent.objects.filter(detail__share_id=share.pk).order_by("pk")
    assert [(r.action, r.actor_name) for r in rows] == [
        (AuditEvent.SHARE_CREATED, "alice"),
        (AuditEvent.SHARE_VIEWED, "bob"),
        (AuditEvent.SHARE_REVOKED, "alice"),
    ]


def test_reloading_a_link_adds_one_audit_row_an_hour_per_viewer(alice, bob, auditor, shared):
    token = _share(_client(alice), shared)
    share = ConversationShare.objects.get(conversation=shared)
    url = reverse("shared-conversation", args=[token])
    viewer = _client(bob)
    for _ in range(5):
        assert viewer.get(url).status_code == 200
    _client(auditor).get(url)

    def views() -> list[str]:
        rows = AuditEvent.objects.filter(
            action=AuditEvent.SHARE_VIEWED, detail__share_id=share.pk
        ).order_by("pk")
        return [row.actor_name for row in rows]

    assert views() == ["bob", _name(auditor)]
    # An hour on, the next opening is written again.
    AuditEvent.objects.filter(action=AuditEvent.SHARE_VIEWED).update(
        created_at=timezone.now() - timedelta(hours=1, seconds=1)
    )
    viewer.get(url)
    assert views() == ["bob", _name(auditor), "bob"]


def _name(user) -> str:
    return user.get_username()


def test_revoked_expired_unknown_and_deleted_links_answer_the_same_nothing(alice, bob, shared):
    owner = _client(alice)
    viewer = _client(bob)
    tokens = {name: _share(owner, shared) for name in ("revoked", "expired", "deleted")}
    shares = {
        name: ConversationShare.objects.get(token_hash=hashlib.sha256(t.encode()).hexdigest())
        for name, t in tokens.items()
    }
    owner.post(reverse("conversation-share-revoke", args=[shared.pk, shares["revoked"].pk]))
    ConversationShare.objects.filter(pk=shares["expired"].pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    tokens["unknown"] = tokens["revoked"][:-4] + "AAAA"

    answers = {}
    for name in ("revoked", "expired", "unknown"):
        answers[name] = viewer.get(reverse("shared-conversation", args=[tokens[name]]))
    Conversation.objects.filter(pk=shared.pk).update(deleted_at=timezone.now())
    answers["deleted"] = viewer.get(reverse("shared-conversation", args=[tokens["deleted"]]))

    assert {name: a.status_code for name, a in answers.items()} == dict.fromkeys(answers, 404)
    # The same page for all four (the CSRF token aside, which differs per answer, and the link's
    # own address, which the settings menu's form carries back as where to return).
    token = re.compile(rb'("X-CSRFToken": "|name="csrfmiddlewaretoken" value=")[^"]*"')
    pages = {
        token.sub(b"", a.content).replace(tokens[name].encode(), b"TOKEN")
        for name, a in answers.items()
    }
    assert len(pages) == 1
    assert b"This link shows nothing" in answers["revoked"].content
    for answer in answers.values():
        assert b"Close the quarter" not in answer.content
        assert b"Quarter close" not in answer.content
        assert leaked(answer.content, _texts_bob_must_not_get()) == []


def test_only_the_owner_makes_lists_or_revokes_links(alice, bob, auditor, shared):
    token = _share(_client(alice), shared)
    share = ConversationShare.objects.get(conversation=shared)
    for intruder in (bob, auditor):
        client = _client(intruder)
        assert client.get(reverse("conversation-shares", args=[shared.pk])).status_code == 404
        made = client.post(reverse("conversation-shares", args=[shared.pk]), {"days": "30"})
        assert made.status_code == 404
        revoked = client.post(reverse("conversation-share-revoke", args=[shared.pk, share.pk]))
        assert revoked.status_code == 404
    assert ConversationShare.objects.count() == 1
    assert _client(bob).get(reverse("shared-conversation", args=[token])).status_code == 200
    # Without the CSRF token the owner's own POST is refused too.
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post(reverse("conversation-shares", args=[shared.pk])).status_code == 403
    assert ConversationShare.objects.count() == 1


def test_a_link_needs_a_signed_in_viewer_and_a_token_not_made_from_ids(alice, shared):
    owner = _client(alice)
    first, second = _share(owner, shared), _share(owner, shared)
    stored = ConversationShare.objects.values_list("pk", "token_hash")

    assert first != second and len(first) >= 43
    for pk, token_hash in stored:
        # Only the digest is stored: the stored value is not a working token.
        assert token_hash not in (first, second)
        assert owner.get(reverse("shared-conversation", args=[token_hash])).status_code == 404
        assert owner.get(reverse("shared-conversation", args=[str(pk)])).status_code == 404
    anonymous = Client().get(reverse("shared-conversation", args=[first]))
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    # An expiry that is not one of the choices makes nothing.
    refused = owner.post(reverse("conversation-shares", args=[shared.pk]), {"days": "3650"})
    assert refused.status_code == 400
    assert ConversationShare.objects.count() == 2


@pytest.mark.django_db(transaction=True)
async def test_a_link_opens_no_websocket_to_the_conversation(alice, bob):
    """Frames: holding a live link, bob still cannot join the conversation's socket."""
    from asgiref.sync import sync_to_async

    from tests.security.helpers import open_tab

    conversation = await Conversation.objects.acreate(owner=alice, title="Quarter close")
    await sync_to_async(ConversationShare.create_for)(conversation, alice)

    tab, connected = await open_tab(bob, conversation.pk)
    try:
        assert not connected
    finally:
        await tab.disconnect()
    # Positive control: the owner's tab connects.
    tab, connected = await open_tab(alice, conversation.pk)
    try:
        assert connected
    finally:
        await tab.disconnect()
