from __future__ import annotations

import json
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from skills_app.audit import requests as audit
from skills_app.core.llm import ModelRequest
from skills_app.core.transcript import StoredMessage
from skills_app.models import (
    Approval,
    Conversation,
    Message,
    ModelCall,
    PermissionRule,
    RequestPart,
    RunEvent,
    SkillInvocation,
)
from skills_app.registry.skills import skills_for_user
from skills_app.runs import store
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model, write_skills

MARKER = "HIDDEN-AUDIT-MARKER-7731"


@pytest.fixture
def staff(django_user_model):
    """Staff who may view the audit but not inspect: sees the invocation list, not hidden text."""
    user = django_user_model.objects.create_user("sam", password="sam-pass-123", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_skillinvocation"))
    return user


@pytest.fixture
def bare_staff(django_user_model):
    """Staff status and nothing else: no role, so no audit."""
    return django_user_model.objects.create_user("stan", password="stan-pass-123", is_staff=True)


@pytest.fixture
def conversation(alice):
    """Alice's conversation with a loaded skill: a status row, a hidden body, an answer."""
    conv = Conversation.objects.create(owner=alice, title="Release work")
    invocation = SkillInvocation.objects.create(
        conversation=conv,
        skill="release-notes",
        source="bundled",
        digest="a" * 64,
        caller="user",
        args="v2.0",
        decision="allowed",
        decided_by='rule "Skill(release-notes)"',
        status_text='<command-message>The "release-notes" skill is loading</command-message>',
        injected_text=f"Base directory for this skill: /tmp/x\n\n{MARKER} write notes",
        allowed_tools=["Bash(git log *)"],
        model_override="claude-other",
    )
    store.append_message(conv.pk, StoredMessage.text("user", "Prepare the release"))
    store.append_message(
        conv.pk,
        StoredMessage.text(
            "user",
            invocation.status_text + "\n<command-name>release-notes</command-name>",
            kind="skill_status",
        ),
        invocation_id=invocation.pk,
    )
    store.append_message(
        conv.pk,
        StoredMessage.text("user", invocation.injected_text, kind="skill_prompt", is_meta=True),
        invocation_id=invocation.pk,
    )
    store.append_message(conv.pk, StoredMessage.text("assistant", "Here are the notes."))
    return conv


def invocation_of(conversation: Conversation) -> SkillInvocation:
    return SkillInvocation.objects.get(conversation=conversation)


def assert_login_redirect(response) -> None:
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


# -- who may see what ---------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["list", "detail"])
def test_it_sends_anonymous_visitors_of_invocation_pages_to_login(client, conversation, page):
    url = (
        reverse("audit-invocations")
        if page == "list"
        else reverse("audit-invocation", args=[invocation_of(conversation).pk])
    )
    assert_login_redirect(client.get(url))


@pytest.mark.django_db
@pytest.mark.parametrize("persona", ["alice", "bob", "bare_staff"])
@pytest.mark.parametrize("page", ["list", "detail"])
def test_it_forbids_invocation_pages_to_non_auditors(client, request, conversation, persona, page):
    client.force_login(request.getfixturevalue(persona))
    url = (
        reverse("audit-invocations")
        if page == "list"
        else reverse("audit-invocation", args=[invocation_of(conversation).pk])
    )
    assert client.get(url).status_code == 403


@pytest.mark.django_db
def test_it_lists_invocations_for_staff_with_every_column(client, staff, conversation):
    client.force_login(staff)
    response = client.get(reverse("audit-invocations"))
    assert response.status_code == 200
    html = response.content.decode()
    row = html[html.index('id="invocation-') :]
    for text in ("alice", "Release work", "release-notes", "aaaaaaaaaaaa", "user", "v2.0"):
        assert text in row
    assert f'title="{"a" * 64}"' in row
    assert "allowed" in row and "rule &quot;Skill(release-notes)&quot;" in row


@pytest.mark.django_db
def test_it_shows_staff_without_the_permission_a_placeholder_instead_of_injected_text(
    client, staff, conversation
):
    client.force_login(staff)
    response = client.get(reverse("audit-invocation", args=[invocation_of(conversation).pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert MARKER not in html
    assert "(hidden: you lack the inspect permission)" in html
    assert "Bash(git log *)" in html and "claude-other" in html


@pytest.mark.django_db
def test_it_shows_inspectors_the_exact_injected_and_status_text(client, auditor, conversation):
    client.force_login(auditor)
    response = client.get(reverse("audit-invocation", args=[invocation_of(conversation).pk]))
    html = response.content.decode()
    assert MARKER in html
    assert "Base directory for this skill: /tmp/x" in html
    assert "&lt;command-message&gt;The &quot;release-notes&quot; skill is loading" in html


@pytest.mark.django_db
def test_it_answers_404_for_an_unknown_invocation(client, staff):
    client.force_login(staff)
    assert client.get(reverse("audit-invocation", args=[999])).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["audit-conversation", "conversation-export", "json"])
def test_it_sends_anonymous_visitors_of_conversation_pages_to_login(client, conversation, name):
    if name == "json":
        url = reverse("audit-request-json", args=[conversation.pk, 1, 1])
    else:
        url = reverse(name, args=[conversation.pk])
    assert_login_redirect(client.get(url))


@pytest.mark.django_db
@pytest.mark.parametrize("persona", ["alice", "bob", "staff"])
def test_it_forbids_the_conversation_audit_without_the_inspect_permission(
    client, request, conversation, persona
):
    client.force_login(request.getfixturevalue(persona))
    assert client.get(reverse("audit-conversation", args=[conversation.pk])).status_code == 403
    assert client.get(reverse("audit-conversations")).status_code == 403


@pytest.mark.django_db
def test_it_shows_inspectors_the_whole_transcript_with_hidden_rows_marked(
    client, auditor, conversation
):
    client.force_login(auditor)
    response = client.get(reverse("audit-conversation", args=[conversation.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert MARKER in html
    assert "Hidden from the user" in html
    assert "Here are the notes." in html
    assert "release-notes" in html


@pytest.mark.django_db
def test_it_lets_inspectors_find_any_conversation(client, auditor, conversation, bob):
    Conversation.objects.create(owner=bob, title="Bob's other thing")
    client.force_login(auditor)
    html = client.get(reverse("audit-conversations"), {"q": "alice"}).content.decode()
    assert "Release work" in html and "Bob&#x27;s other thing" not in html


# -- export -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_it_lets_the_owner_export_without_hidden_content(client, alice, conversation):
    client.force_login(alice)
    response = client.get(reverse("conversation-export", args=[conversation.pk]))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/jsonl")
    assert "attachment" in response["Content-Disposition"]
    body = response.content
    assert MARKER.encode() not in body
    assert b"Base directory for this skill" not in body
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert [line["kind"] for line in lines] == ["text", "skill_status", "text"]
    assert all(line["isMeta"] is False for line in lines)


@pytest.mark.django_db
def test_it_exports_hidden_rows_to_an_inspector(client, auditor, conversation):
    client.force_login(auditor)
    body = client.get(reverse("conversation-export", args=[conversation.pk])).content.decode()
    lines = [json.loads(line) for line in body.splitlines()]
    assert [line["isMeta"] for line in lines] == [False, False, True, False]
    assert MARKER in lines[2]["message"]["content"][0]["text"]


@pytest.mark.django_db
@pytest.mark.parametrize("persona", ["bob", "staff"])
def test_it_hides_the_export_from_other_users(client, request, conversation, persona):
    client.force_login(request.getfixturevalue(persona))
    assert client.get(reverse("conversation-export", args=[conversation.pk])).status_code == 404


# -- filters and pages --------------------------------------------------------------------------


def _invocation(conv: Conversation, skill: str, **fields) -> SkillInvocation:
    fields.setdefault("caller", "model")
    fields.setdefault("decision", "allowed")
    return SkillInvocation.objects.create(conversation=conv, skill=skill, **fields)


def _listed(client, **params) -> set[int]:
    html = client.get(reverse("audit-invocations"), params).content.decode()
    ids = set()
    for part in html.split('id="invocation-')[1:]:
        ids.add(int(part[: part.index('"')]))
    return ids


@pytest.mark.django_db
def test_it_filters_invocations_by_skill_user_caller_decision_and_date(client, staff, alice, bob):
    a_conv = Conversation.objects.create(owner=alice)
    b_conv = Conversation.objects.create(owner=bob)
    pdf = _invocation(a_conv, "pdf", caller="user")
    denied = _invocation(a_conv, "pdf", decision="denied", error_code="permission_denied")
    failed = _invocation(b_conv, "docx", decision="failed", error_code="unknown_skill")
    old = _invocation(b_conv, "docx")
    SkillInvocation.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=10))
    client.force_login(staff)
    assert _listed(client) == {pdf.pk, denied.pk, failed.pk, old.pk}
    assert _listed(client, skill="pdf") == {pdf.pk, denied.pk}
    assert _listed(client, user="bob") == {failed.pk, old.pk}
    assert _listed(client, caller="user") == {pdf.pk}
    assert _listed(client, decision="denied") == {denied.pk}
    since = (timezone.localdate() - timedelta(days=1)).isoformat()
    until = (timezone.localdate() - timedelta(days=5)).isoformat()
    assert _listed(client, since=since) == {pdf.pk, denied.pk, failed.pk}
    assert _listed(client, until=until) == {old.pk}
    assert _listed(client, user="bob", decision="failed") == {failed.pk}


@pytest.mark.django_db
def test_it_says_what_decided_a_failed_invocation(client, staff, alice):
    failed = _invocation(
        Conversation.objects.create(owner=alice),
        "ghost",
        decision="failed",
        error_code="unknown_skill",
        decided_by="unknown_skill",
    )
    client.force_login(staff)
    html = client.get(reverse("audit-invocations")).content.decode()
    row = html[html.index(f'id="invocation-{failed.pk}"') :]
    assert "error: unknown_skill" in row[: row.index("</tr>")]


@pytest.mark.django_db
def test_it_paginates_the_invocation_list_keeping_the_filters(client, staff, alice):
    conv = Conversation.objects.create(owner=alice)
    for _ in range(52):
        _invocation(conv, "pdf")
    _invocation(conv, "other")
    client.force_login(staff)
    assert len(_listed(client, skill="pdf")) == 50
    second = client.get(reverse("audit-invocations"), {"skill": "pdf", "page": 2})
    html = second.content.decode()
    assert html.count('id="invocation-') == 2
    assert "skill=pdf&amp;page=1" in html


# -- driven runs: tool calls, approvals, and what the model saw -----------------------------------


@pytest.fixture
def skills_dir(settings, tmp_path):
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    return settings.SKILLS_DIRS[0]


def bash_then_done(request):
    """Run `echo hi` (pre-approved by echoer), then `ls` (asked), then finish."""
    last = request["messages"][-1]["content"]
    results = [b for b in last if b.get("type") == "tool_result"]
    if not results:
        return Reply.tool_use("Bash", {"command": "echo hi"})
    if "hi" in str(results[0]["content"]) and len(request["messages"]) < 5:
        return Reply.tool_use("Bash", {"command": "ls -a"})
    return Reply.text("All done.")


@pytest.mark.django_db(transaction=True)
async def test_it_lists_the_tool_calls_under_a_skill_with_decisions_and_approvers(
    settings, fake_anthropic, skills_dir, alice, staff, client
):
    use_fake_model(settings, fake_anthropic)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(echoer)")
    conversation = await Conversation.objects.acreate(owner=alice, title="echo")
    fake_anthropic.set_responder(bash_then_done)

    await run_turn(conversation, "/echoer hi", alice, answer=Approval.ALLOW_ONCE)

    invocation = await SkillInvocation.objects.aget(conversation=conversation)
    approval = await Approval.objects.aget(conversation=conversation)
    assert approval.call_text == "Bash(ls -a)"
    await sync_to_async(client.force_login)(staff)
    url = reverse("audit-invocation", args=[invocation.pk])
    response = await sync_to_async(client.get)(url)
    html = response.content.decode()
    table = html[html.index('id="tool-calls"') :]
    echo_row, ls_row = table.split('<tr data-tool="Bash">')[1:3]
    assert "Bash(echo hi)" in echo_row and "allow" in echo_row and "not asked" in echo_row
    assert "Bash(ls -a)" in ls_row
    assert f"#{approval.pk} allow once by alice" in ls_row
    assert "approved once by alice" in ls_row


async def _drive_two_runs(settings, fake_anthropic, alice) -> Conversation:
    """A model-called skill with a tool call, then a slash command that switches the model."""
    use_fake_model(settings, fake_anthropic)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(switcher)")
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Write")
    conversation = await Conversation.objects.acreate(owner=alice, title="two runs")
    fake_anthropic.enqueue(
        Reply.tool_use("Skill", {"skill": "greeter", "args": "Bob"}, text="Loading it."),
        Reply.tool_use("Read", {"file_path": "missing.txt"}),
        Reply.text("Hello Bob, sunny today."),
        Reply.text("Switched."),
    )
    await run_turn(conversation, "greet Bob", alice)
    await run_turn(conversation, "/switcher now", alice)
    return conversation


def as_sent(received) -> dict:
    """A request body the fake server received, without the SDK's own `stream` flag."""
    return {k: v for k, v in received.items() if k != "stream"}


def canonical(body: dict) -> str:
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


async def change_skills_and_rules(skills_dir) -> None:
    """What makes a rebuild drift: a skill's body and description change, a rule removes a tool."""
    greeter = skills_dir / "greeter" / "SKILL.md"
    text = greeter.read_text().replace("GREETER-BODY-MARKER", "GREETER-CHANGED")
    greeter.write_text(text.replace("in a friendly way", "in a changed way"))
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Glob")


@pytest.mark.django_db(transaction=True)
async def test_what_the_model_saw_equals_what_the_fake_server_received(
    settings, fake_anthropic, skills_dir, alice
):
    conversation = await _drive_two_runs(settings, fake_anthropic, alice)
    await change_skills_and_rules(skills_dir)

    received = accepted(fake_anthropic)
    views = []
    async for run in conversation.runs.order_by("started_at"):
        views.extend(await sync_to_async(audit.requests_for_run)(run))

    assert len(received) == 4 and len(views) == 4
    for view, body in zip(views, received, strict=True):
        assert view.captured and view.verified
        assert view.as_kwargs() == as_sent(body)  # every field, cache markers included
        assert canonical(view.as_kwargs()) == canonical(as_sent(body))  # byte for byte
    # The deny rule removed Write from every request; the switcher's model applied in run 2.
    assert all("Write" not in [t["name"] for t in v.tools] for v in views)
    assert "Glob" in [t["name"] for t in views[0].tools]  # the later deny rule changed nothing
    assert "in a friendly way" in views[0].catalog
    assert views[3].model == "claude-haiku-4-5"
    assert [v.call for v in views] == [1, 2, 3, 1]


@pytest.mark.django_db(transaction=True)
async def test_system_and_tools_are_stored_once_however_many_calls_share_them(
    settings, fake_anthropic, skills_dir, alice
):
    conversation = await _drive_two_runs(settings, fake_anthropic, alice)
    calls = [c async for c in ModelCall.objects.filter(conversation=conversation)]
    assert len(calls) == 4
    assert len({c.tools_id for c in calls}) == 1  # one tool list, shared
    assert await RequestPart.objects.acount() == len({c.system_id for c in calls}) + 1
    assert all(c.messages is None and c.first_seq == 1 for c in calls)  # rows, not copies


def load_by_profile(request):
    """Load greeter with whatever loader the request offers, then answer."""
    names = [t["name"] for t in request.get("tools", [])]
    last = request["messages"][-1]["content"]
    if any(b.get("type") == "tool_result" for b in last):
        return Reply.text("Hello Bob.")
    for tool, key in (("Skill", "skill"), ("load_skill", "name"), ("skill_load", "skill")):
        if tool in names:
            return Reply.tool_use(tool, {key: "greeter"})
    return Reply.text("no loader")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("profile", ["meta-message", "tool-result", "system-prompt"])
async def test_what_the_model_saw_matches_in_every_delivery_profile(
    settings, fake_anthropic, skills_dir, alice, profile
):
    use_fake_model(settings, fake_anthropic)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    conversation = await Conversation.objects.acreate(owner=alice, profile=profile)
    fake_anthropic.set_responder(load_by_profile)
    await run_turn(conversation, "greet Bob", alice)
    await run_turn(conversation, "thanks", alice)

    await change_skills_and_rules(skills_dir)

    received = accepted(fake_anthropic)
    views = []
    async for run in conversation.runs.order_by("started_at"):
        views.extend(await sync_to_async(audit.requests_for_run)(run))
    assert len(received) == len(views) >= 3
    for view, body in zip(views, received, strict=True):
        assert view.captured and view.verified
        assert canonical(view.as_kwargs()) == canonical(as_sent(body))
    assert "GREETER-BODY-MARKER" in json.dumps(received[-1])
    assert "GREETER-BODY-MARKER" in json.dumps(views[-1].as_kwargs())  # not today's body
    sizes = audit.size_breakdown(views[-1])
    assert sizes["catalog"]["chars"] > 0
    assert sizes["skill_bodies"]["chars"] >= len("GREETER-BODY-MARKER")


@pytest.mark.django_db(transaction=True)
async def test_the_conversation_audit_shows_each_request_with_its_size_breakdown(
    settings, fake_anthropic, skills_dir, alice, auditor, client
):
    conversation = await _drive_two_runs(settings, fake_anthropic, alice)
    await sync_to_async(client.force_login)(auditor)

    url = reverse("audit-conversation", args=[conversation.pk])
    html = (await sync_to_async(client.get)(url)).content.decode()

    assert html.count('class="model-request"') == 4
    assert "GREETER-BODY-MARKER" in html
    assert "&lt;available_skills&gt;" in html
    assert "Injected skill bodies" in html and "Skill catalog (Skill tool description)" in html
    assert 'id="layer-saving"' in html
    assert "Messages 1–" in html  # later requests show only their new messages

    first_run = await conversation.runs.order_by("started_at").afirst()
    json_url = reverse("audit-request-json", args=[conversation.pk, first_run.pk, 3])
    body = json.loads((await sync_to_async(client.get)(json_url)).content)
    assert body["messages"] == accepted(fake_anthropic)[2]["messages"]


@pytest.mark.django_db(transaction=True)
async def test_a_run_recorded_before_captures_is_rebuilt_and_marked_as_such(
    settings, fake_anthropic, skills_dir, alice
):
    """Without a capture, rows written without a `message` event (repairs) count by time."""
    use_fake_model(settings, fake_anthropic)
    conversation = await Conversation.objects.acreate(owner=alice)
    fake_anthropic.enqueue(Reply.text("first"), Reply.text("second"))
    await run_turn(conversation, "hello", alice)
    await sync_to_async(store.append_message)(
        conversation.pk, StoredMessage.text("user", "written without an event")
    )
    run = await run_turn(conversation, None, alice)
    # As before captures existed (audit rows are never deleted: the capture is taken away).
    await ModelCall.objects.filter(run=run).aupdate(body_digest="", options={})

    views = await sync_to_async(audit.requests_for_run)(run)
    assert not views[0].captured and audit.REBUILT_NOTE in views[0].notes
    assert views[0].messages == accepted(fake_anthropic)[1]["messages"]
    assert "written without an event" in json.dumps(views[0].messages)
    assert await RunEvent.objects.filter(run=run, type="model.call").acount() == 1


@pytest.mark.django_db(transaction=True)
async def test_a_capture_whose_rows_were_changed_is_not_verified(
    settings, fake_anthropic, skills_dir, alice
):
    use_fake_model(settings, fake_anthropic)
    conversation = await Conversation.objects.acreate(owner=alice)
    fake_anthropic.enqueue(Reply.text("first"))
    run = await run_turn(conversation, "hello", alice)
    await Message.objects.filter(conversation=conversation, seq=1).aupdate(
        content=[{"type": "text", "text": "tampered"}]
    )
    views = await sync_to_async(audit.requests_for_run)(run)
    assert views[0].captured and not views[0].verified
    assert "no longer matches" in views[0].notes[0]


# -- the size breakdown -------------------------------------------------------------------------


def test_size_breakdown_puts_every_character_in_one_part():
    catalog = "CATALOG " * 10
    body = "Base directory for this skill: /s\n\nBODY"
    request = ModelRequest(
        model="m",
        system="SYSTEM",
        tools=[
            {"name": "Read", "description": "reads", "input_schema": {"type": "object"}},
            {"name": "Skill", "description": catalog, "input_schema": {"type": "object"}},
        ],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "hello"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "12345678"},
                    {"type": "text", "text": body},
                ],
            },
        ],
        max_tokens=10,
    )
    sizes = audit.size_breakdown(request)
    assert sizes["system_prompt"] == {"chars": 6, "tokens": 2}
    assert sizes["catalog"]["chars"] == len(catalog)
    assert sizes["skill_bodies"]["chars"] == len(body)
    assert sizes["tool_results"] == {"chars": 8, "tokens": 2}
    assert sizes["conversation"]["chars"] == len("hello") + len("Read") + len("{}")
    assert sizes["tool_schemas"]["chars"] > len("reads")
    assert sizes["total"]["chars"] == sum(v["chars"] for k, v in sizes.items() if k != "total")


def test_size_breakdown_counts_a_load_skill_result_as_a_skill_body():
    request = ModelRequest(
        model="m",
        system="",
        tools=[],
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": '<skill name="x">B</skill>',
                    }
                ],
            }
        ],
        max_tokens=1,
    )
    sizes = audit.size_breakdown(request)
    assert sizes["skill_bodies"]["chars"] == len('<skill name="x">B</skill>')
    assert sizes["tool_results"]["chars"] == 0
    assert sizes["catalog"]["chars"] == 0


def test_size_breakdown_finds_the_catalog_and_bodies_in_a_toolset_system_prompt():
    catalog = "Available skills:\n  - pdf: PDFs"
    body = '<loaded_skill name="pdf">\nBODY\n</loaded_skill>'
    request = ModelRequest(
        model="m", system=f"BASE\n\n{catalog}\n\n{body}", tools=[], messages=[], max_tokens=1
    )
    sizes = audit.size_breakdown(request)
    assert sizes["catalog"]["chars"] == len(catalog)
    assert sizes["skill_bodies"]["chars"] == len(body)
    assert sizes["system_prompt"]["chars"] == len("BASE\n\n\n\n")


@pytest.mark.django_db
def test_layer_saving_compares_the_catalog_with_every_body(skills_dir, alice):
    saving = audit.layer_saving(skills_for_user(alice.pk))
    # greeter, model-only, echoer, switcher (manual-only is not model-invocable) + bundled skills.
    assert saving.skills >= 4
    assert saving.all_bodies_chars > 0 and saving.catalog_chars > 0


@pytest.mark.django_db
def test_an_imported_conversation_has_no_requests_to_rebuild(alice):
    conversation = Conversation.objects.create(owner=alice)
    Message.objects.create(conversation=conversation, seq=1, role="user", content=[])
    assert audit.requests_for_conversation(conversation) == {}
