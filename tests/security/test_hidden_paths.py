"""Issue 11: every other way hidden text could leave for a non-inspector passes the one filter.

Approval prompts, error rows and error results, downloads of a copied skill file, `!` command
output and hook output in a tool result, the full-text view, and the index's cache (a new
invocation's text is withheld from the very next fragment). Each with its positive control.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from skills_app import visibility
from skills_app.chat import rendering
from skills_app.models import (
    Approval,
    Conversation,
    Message,
    Run,
    SkillInvocation,
    SkillPackage,
)
from skills_app.runs import eventlog, store
from skills_app.workspaces import workspace_for
from tests.security.helpers import client_of, frames_text, leaked, open_tab, resume

BODY = textwrap.dedent(
    """\
    Open the vault with the brass key kept under the loose floorboard.
    Count the gold bars twice and write the total in the green notebook.
    """
)
SKILL_MD = f"---\nname: vault\ndescription: Vault chores.\n---\n{BODY}"
SHELL_OUTPUT = "The night guard changes shift at a quarter past eleven every evening."
HOOK_OUTPUT = "Hook says: the alarm code this week is the founder's birthday reversed."
HIDDEN = [BODY, SHELL_OUTPUT, HOOK_OUTPUT]


def seed(owner: Any, tmp_path: Path) -> Conversation:
    """A conversation in which the "vault" skill was loaded (staged, injected, `!` output)."""
    conversation = Conversation.objects.create(owner=owner, title="vault")
    run = Run.objects.create(conversation=conversation, status=Run.DONE)
    source = tmp_path / "src" / "vault"
    source.mkdir(parents=True)
    (source / "SKILL.md").write_text(SKILL_MD)
    workspace_for(conversation.pk).stage_skill("vault", source, "d-vault")
    invocation = SkillInvocation.objects.create(
        conversation=conversation,
        run=run,
        skill="vault",
        source="dirs",
        digest="d-vault",
        caller="model",
        decision="allowed",
        injected_text=f"Base directory for this skill: /w/skills/vault\n\n{BODY}",
        shell_commands=[{"command": "cat guard-roster.txt", "output": SHELL_OUTPUT}],
    )
    eventlog.append_event(conversation.pk, "audit.hook", {"output": HOOK_OUTPUT}, run_id=run.pk)
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="user",
        kind="skill_prompt",
        is_meta=True,
        content=[{"type": "text", "text": invocation.injected_text}],
        invocation=invocation,
        run=run,
    )
    return conversation


def add_tool_call(
    conversation: Conversation, name: str, tool_input: dict, result: str, **kw
) -> str:
    seq = conversation.messages.count()
    tool_use_id = f"toolu_{name}_{seq}"
    Message.objects.create(
        conversation=conversation,
        seq=seq + 1,
        role="assistant",
        kind="tool_use",
        content=[{"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}],
    )
    Message.objects.create(
        conversation=conversation,
        seq=seq + 2,
        role="user",
        kind="tool_result",
        content=[{"type": "tool_result", "tool_use_id": tool_use_id, "content": result, **kw}],
    )
    return tool_use_id


def page(user: Any, conversation: Conversation) -> bytes:
    response = client_of(user).get(reverse("conversation", args=[conversation.pk]))
    assert response.status_code == 200
    return response.content


def export(user: Any, conversation: Conversation) -> bytes:
    response = client_of(user).get(reverse("conversation-export", args=[conversation.pk]))
    assert response.status_code == 200
    return response.content


@pytest.mark.django_db
def test_an_error_result_and_an_error_row_are_filtered(alice, auditor, tmp_path):
    conversation = seed(alice, tmp_path)
    add_tool_call(
        conversation,
        "Bash",
        {"command": "cat skills/vault/SKILL.md; exit 1"},
        f"{SKILL_MD}\n(exit code 1)",
        is_error=True,
    )
    Message.objects.create(
        conversation=conversation,
        seq=conversation.messages.count() + 1,
        role="assistant",
        kind="error",
        content=[{"type": "text", "text": f"The run failed while reading: {BODY}"}],
    )
    for body in (page(alice, conversation), export(alice, conversation)):
        assert leaked(body, HIDDEN) == []
        assert b"[hidden skill" in body
    # Positive control: the inspector, given the conversation, sees both in full.
    Conversation.objects.filter(pk=conversation.pk).update(owner=auditor)
    shown = page(auditor, conversation)
    assert b"brass key kept under the loose floorboard" in shown
    assert shown.count(b"Count the gold bars twice") >= 2  # the result and the error row


@pytest.mark.django_db
def test_dynamic_context_and_hook_output_are_withheld_from_tool_results(alice, tmp_path):
    conversation = seed(alice, tmp_path)
    add_tool_call(conversation, "Bash", {"command": "cat guard-roster.txt"}, SHELL_OUTPUT)
    add_tool_call(conversation, "Bash", {"command": "./alarm.sh"}, HOOK_OUTPUT)
    body = page(alice, conversation)
    assert leaked(body, HIDDEN) == []
    assert b"[hidden dynamic-context output withheld:" in body
    assert b"[hidden hook output withheld:" in body


@pytest.mark.django_db(transaction=True)
async def test_an_approval_prompt_is_filtered_live_on_replay_and_on_the_page(
    alice, auditor, tmp_path
):
    from asgiref.sync import sync_to_async

    def arrange(owner: Any) -> tuple[Conversation, Approval]:
        conversation = seed(owner, tmp_path / owner.username)
        run = conversation.runs.get()
        call = {"file_path": "out/notes.md", "content": BODY}
        approval = Approval.objects.create(
            conversation=conversation,
            run=run,
            tool="Write",
            input=call,
            call_text=f"Write(out/notes.md) with {BODY}",
            reason="Write needs approval",
        )
        eventlog.append_event(
            conversation.pk,
            "approval.requested",
            {"approval_id": approval.pk, "tool": "Write"},
            run_id=run.pk,
        )
        return conversation, approval

    conversation, approval = await sync_to_async(arrange)(alice)
    tab, connected = await open_tab(alice, conversation.pk)
    assert connected
    frames = frames_text(await resume(tab))
    await tab.disconnect()
    assert f"approval-{approval.pk}" in frames  # the prompt was sent
    assert leaked(frames, HIDDEN) == [] and "[hidden skill" in frames
    shown = await sync_to_async(page)(alice, conversation)
    assert f"approval-{approval.pk}".encode() in shown and leaked(shown, HIDDEN) == []
    # Positive control: an inspector's prompt shows the call as it is.
    theirs, _ = await sync_to_async(arrange)(auditor)
    tab, _ = await open_tab(auditor, theirs.pk)
    frames = frames_text(await resume(tab))
    await tab.disconnect()
    assert "brass key kept under the loose floorboard" in frames


@pytest.mark.django_db
def test_a_skill_file_copied_to_out_is_filtered_when_downloaded(alice, auditor, tmp_path):
    conversation = seed(alice, tmp_path)
    out = workspace_for(conversation.pk).out_dir
    (out / "copy.md").write_text(f"My notes.\n{SKILL_MD}")
    (out / "plain.txt").write_text("nothing hidden here\n")
    url = reverse("conversation-file", args=[conversation.pk, "out/copy.md"])
    response = client_of(alice).get(url)
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert response.status_code == 200 and body.startswith(b"My notes.")
    assert leaked(body, HIDDEN) == [] and b"withheld" in body
    assert 'filename="copy.md"' in response["Content-Disposition"]
    plain = client_of(alice).get(
        reverse("conversation-file", args=[conversation.pk, "out/plain.txt"])
    )
    assert b"".join(plain.streaming_content) == b"nothing hidden here\n"
    # Positive control: an inspector owner downloads it whole.
    Conversation.objects.filter(pk=conversation.pk).update(owner=auditor)
    whole = client_of(auditor).get(url)
    assert b"brass key kept under the loose floorboard" in b"".join(whole.streaming_content)


@pytest.mark.django_db
def test_the_full_text_of_a_tool_result_is_for_its_owner_and_filtered(alice, bob, tmp_path):
    conversation = seed(alice, tmp_path)
    listing = "\n".join(f"work/file-{n:05d}.txt" for n in range(12_000))
    tool_use_id = add_tool_call(conversation, "Bash", {"command": "ls work"}, f"{listing}\n{BODY}")
    url = reverse("conversation-tool-text", args=[conversation.pk, tool_use_id, "result"])
    full = client_of(alice).get(url)
    assert full.status_code == 200 and full["Content-Type"].startswith("text/plain")
    # (The placeholder may take a character or two its neighbour shares with the hidden text.)
    assert b"work/file-11998.txt" in full.content and leaked(full.content, HIDDEN) == []
    assert client_of(bob).get(url).status_code == 404
    missing = reverse("conversation-tool-text", args=[conversation.pk, "toolu_nope", "result"])
    assert client_of(alice).get(missing).status_code == 404


@pytest.mark.django_db
def test_a_new_invocation_is_withheld_from_the_very_next_fragment(alice, tmp_path):
    conversation = seed(alice, tmp_path)
    later = "A second skill says: ship the crates by the northern road at dawn only."
    out = visibility.outbound(conversation.pk, can_inspect=False)
    assert out.text(later) == later  # the index is built and cached: nothing of it is hidden
    SkillInvocation.objects.create(
        conversation=conversation,
        skill="crates",
        caller="model",
        decision="allowed",
        injected_text=later,
    )
    html = rendering.render_tool_result(
        conversation.pk, "toolu_x", {"content": later}, can_inspect=False
    )
    assert "northern road" not in html and "withheld" in html
    assert "northern road" in rendering.render_tool_result(
        conversation.pk, "toolu_x", {"content": later}, can_inspect=True
    )


@pytest.mark.django_db
def test_an_uploaded_skill_is_judged_by_its_package_and_its_owners_own_upload_is_visible(
    alice, bob, tmp_path
):
    conversation = seed(alice, tmp_path)
    SkillInvocation.objects.filter(conversation=conversation).update(source="personal")
    SkillPackage.objects.create(name="vault", owner=bob)  # someone else's: still hidden
    assert visibility.outbound(conversation.pk, can_inspect=False).text(BODY) != BODY
    SkillPackage.objects.create(name="vault", owner=alice)  # alice wrote it herself
    assert visibility.outbound(conversation.pk, can_inspect=False).text(BODY) == BODY
    # `!` output stays hidden even when the source is visible.
    assert "quarter past eleven" not in visibility.outbound(
        conversation.pk, can_inspect=False
    ).text(SHELL_OUTPUT)


@pytest.mark.django_db
def test_an_answer_quoting_hidden_text_marks_its_run_for_the_audit(alice, auditor, tmp_path):
    conversation = seed(alice, tmp_path)
    run = conversation.runs.get()
    from skills_app.core.transcript import StoredMessage

    quoting = StoredMessage.text("assistant", f"Your skill says: {BODY.splitlines()[0]}")
    row = store.append_message(conversation.pk, quoting, run_id=run.pk)
    plain = StoredMessage.text("assistant", "All done; nothing else to add for today at all.")
    other = store.append_message(conversation.pk, plain, run_id=run.pk)
    run.refresh_from_db()
    assert (
        run.quoted_hidden and row.meta.get("quoted_hidden") and not other.meta.get("quoted_hidden")
    )
    # The prose is shown as written (the documented limit) and the chatter sees no mark.
    shown = page(alice, conversation)
    assert b"brass key kept under the loose floorboard" in shown
    assert b"Quotes hidden text" not in shown
    # The inspector's audit shows the mark on the run.
    audit = client_of(auditor).get(reverse("audit-conversation", args=[conversation.pk]))
    assert f'id="quoted-hidden-{run.pk}"'.encode() in audit.content


@pytest.mark.django_db
def test_the_conversation_search_is_no_oracle_for_hidden_text_in_an_error(alice, tmp_path):
    conversation = seed(alice, tmp_path)
    Message.objects.create(
        conversation=conversation,
        seq=conversation.messages.count() + 1,
        role="assistant",
        kind="error",
        content=[{"type": "text", "text": f"The run failed while reading: {BODY}"}],
    )
    client = client_of(alice)

    def found(q: str) -> bool:
        return conversation.title.encode() in client.get(reverse("skills-home"), {"q": q}).content

    assert found("run failed while reading")  # positive control: the error row is searched
    assert not found("brass key kept under")  # the withheld part is not


@pytest.mark.django_db
def test_a_persons_own_long_skill_arguments_are_never_withheld_from_them(alice, tmp_path):
    """The arguments sit inside the injected text; the chip still shows them as typed."""
    from skills_app.core.transcript import status_message_text

    conversation = seed(alice, tmp_path)
    args = "please summarise the quarterly report for the northern region in detail"
    SkillInvocation.objects.create(
        conversation=conversation,
        skill="vault",
        caller="user",
        decision="allowed",
        args=args,
        injected_text=f"{BODY}\nARGUMENTS: {args}",
    )
    Message.objects.create(
        conversation=conversation,
        seq=conversation.messages.count() + 1,
        role="user",
        kind="skill_status",
        content=[{"type": "text", "text": status_message_text("vault", args)}],
    )
    assert args.encode() in page(alice, conversation)
    assert args.encode() in export(alice, conversation)
