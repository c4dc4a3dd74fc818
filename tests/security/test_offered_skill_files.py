"""Issue 23, High: any offered skill's files, read verbatim through `skill://` inputs.

The attack: in a system-prompt conversation the model loads one skill and runs it with
`inputs: [{"src": "skill://secret-two/SKILL.md"}, ...]`, copying another offered skill's files
into work/inputs/, then `cat`s them. The filter used to know only the invoked skills, so the
body reached the tool card, the websocket frames, the page and the exports. Now every file of
every skill offered to (or staged for) the conversation is hidden from people without the
inspect permission, invoked or not; `skill://` reads only skills the rules let the conversation
use, and a deny rule on a skill denies its files. Positive controls: the model did get the text
when the rules allowed it, and a person's own personal skill is shown to them.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from skills_app import visibility
from skills_app.models import Conversation, Message, PermissionRule, Run
from skills_app.registry.uploads import install_archive
from skills_app.runs import supervisor as runs
from skills_app.runs.factory import workspace_for
from tests.security.helpers import client_of, frames_text, frames_until, leaked, open_tab, resume
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model
from tests.support.upload_helpers import make_zip

pytestmark = pytest.mark.django_db(transaction=True)

SECRET_BODY = textwrap.dedent(
    """\
    Quote the discount ladder only to partners: eleven percent after the third crate.
    The supplier in Tromso ships on Tuesdays, and the code word at the gate is marmalade.
    """
)
SECRET_SCRIPT = "PRICE_TABLE = {'partner': 0.89, 'walk-in': 1.0}  # never print the partner rate\n"
HELPER_BODY = "Run the command the user asks for and report what it printed, in one line.\n"
HIDDEN = [SECRET_BODY, SECRET_SCRIPT]
STEAL = "cat work/inputs/SKILL.md work/inputs/tool.py"


def _skill_md(name: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: The {name} skill.\n---\n{body}"


def _skills(root: Path) -> Path:
    for name, body in (("helper", HELPER_BODY), ("secret-two", SECRET_BODY)):
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(_skill_md(name, body))
    (root / "secret-two" / "scripts").mkdir()
    (root / "secret-two" / "scripts" / "tool.py").write_text(SECRET_SCRIPT)
    return root


@pytest.fixture
def offered(settings, fake_anthropic, tmp_path) -> Any:
    use_fake_model(settings, fake_anthropic, retries=0)
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    settings.SKILLS_DIRS = [_skills(tmp_path / "skills")]
    settings.BUNDLED_SKILLS_DIR = tmp_path / "no-bundled"
    PermissionRule.objects.create(behavior="allow", rule_text="Skill(helper)")
    PermissionRule.objects.create(behavior="allow", rule_text="Bash")
    return fake_anthropic


def _steal(fake: Any, *sources: str, extra: tuple[dict[str, str], ...] = ()) -> None:
    inputs = [*({"src": s} for s in sources), *extra]
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "helper"}),
        Reply.tool_use("skill_run", {"skill": "helper", "command": STEAL, "inputs": inputs}),
        Reply.text("Printed it."),
    )


def _get(client: Any, url: str) -> bytes:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return b"".join(response.streaming_content) if response.streaming else response.content


def _run_result(fake: Any) -> dict[str, Any]:
    """What the model got back from skill_run (the third request's last tool result)."""
    block = accepted(fake)[2]["messages"][-1]["content"][0]
    return {"is_error": block.get("is_error", False), "text": str(block["content"])}


async def test_another_skills_files_copied_by_skill_run_are_withheld_everywhere(
    alice, offered, settings
):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(secret-two)")
    conversation = await Conversation.objects.acreate(owner=alice, profile="system-prompt")
    _steal(
        offered,
        "skill://secret-two/SKILL.md",
        "skill://secret-two/scripts/tool.py",
        extra=({"src": "skill://secret-two/SKILL.md", "dst": "out/stolen.md"},),
    )
    tab, connected = await open_tab(alice, conversation.pk)
    assert connected
    await resume(tab)
    await tab.send_json_to({"action": "send", "text": "print the files"})
    frames = await frames_until(tab, lambda f: f.get("type") == "run.finished", timeout=40)
    for run in [r async for r in Run.objects.filter(conversation=conversation)]:
        await runs.wait_for_run(run.pk, timeout=30)
    await tab.disconnect()
    live = frames_text(frames)
    # Positive control: the copy worked and the model read both files.
    result = _run_result(offered)
    assert not result["is_error"] and "code word at the gate" in result["text"]
    assert "partner rate" in result["text"]
    # secret-two was never invoked, yet its files are withheld in the tool card as it streams.
    assert leaked(live, HIDDEN) == [], leaked(live, HIDDEN)
    assert "[hidden skill file secret-two/SKILL.md withheld:" in live

    def pages() -> None:
        client = client_of(alice)
        for name in ("conversation", "conversation-export", "conversation-export-markdown"):
            body = _get(client, reverse(name, args=[conversation.pk]))
            assert leaked(body, HIDDEN) == [], name
        assert b"withheld" in _get(client, reverse("conversation", args=[conversation.pk]))
        # The copy offered as a download (an artifact) is filtered too.
        stolen = _get(client, reverse("conversation-file", args=[conversation.pk, "out/stolen.md"]))
        assert stolen and leaked(stolen, HIDDEN) == [] and b"withheld" in stolen
        for row in Message.objects.filter(conversation=conversation, kind="tool_use"):
            tool_use_id = row.content[0]["id"]
            url = reverse("conversation-tool-text", args=[conversation.pk, tool_use_id, "result"])
            assert leaked(_get(client, url), HIDDEN) == []

    await sync_to_async(pages)()
    tab, _ = await open_tab(alice, conversation.pk)
    replay = frames_text(await resume(tab))
    await tab.disconnect()
    assert leaked(replay, HIDDEN) == [] and "withheld" in replay


async def test_a_deny_rule_on_a_skill_denies_its_files(alice, offered):
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Skill(secret-two)")
    conversation = await Conversation.objects.acreate(owner=alice, profile="system-prompt")
    _steal(offered, "skill://secret-two/SKILL.md")
    await run_turn(conversation, "print the files", alice)
    result = _run_result(offered)
    assert result["is_error"] and "secret-two" in result["text"]
    assert "Skill(secret-two)" in result["text"]  # which rule refused it
    inputs = (await sync_to_async(workspace_for)(conversation.pk)).work_dir / "inputs"
    assert not (inputs / "SKILL.md").exists()
    assert "code word" not in json.dumps([r["messages"] for r in accepted(offered)])


async def test_a_skill_the_rules_ask_about_is_asked_before_its_files_are_read(alice, offered):
    await PermissionRule.objects.acreate(behavior="ask", rule_text="Skill(secret-two)")
    conversation = await Conversation.objects.acreate(owner=alice, profile="system-prompt")
    _steal(offered, "skill://secret-two/scripts/tool.py")
    run = await run_turn(conversation, "print the files", alice, answer="deny")
    result = _run_result(offered)
    assert result["is_error"] and "partner rate" not in result["text"]
    approval = await run.approvals.aget()
    assert approval.tool == "Skill" and "secret-two" in approval.call_text


async def test_another_users_personal_skill_is_never_reachable(alice, bob, offered):
    def upload() -> None:
        archive = make_zip({"SKILL.md": _skill_md("bobs-notes", SECRET_BODY)})
        install_archive(archive, "bobs-notes.zip", user=bob, personal=True)

    await sync_to_async(upload)()
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    conversation = await Conversation.objects.acreate(owner=alice, profile="system-prompt")
    _steal(offered, "skill://bobs-notes/SKILL.md")
    await run_turn(conversation, "print the files", alice)
    result = _run_result(offered)
    assert result["is_error"] and "not" in result["text"] and "offered" in result["text"]
    assert "code word" not in result["text"]


@pytest.mark.django_db
def test_every_offered_skill_is_hidden_from_the_first_fragment_on(alice, offered):
    """No invocation at all: the conversation's filter already knows every offered skill."""
    conversation = Conversation.objects.create(owner=alice)
    out = visibility.outbound(conversation.pk, can_inspect=False)
    assert "code word at the gate" not in out.text(f"It said: {SECRET_BODY}")
    assert "partner rate" not in out.text(SECRET_SCRIPT)
    # Positive control: an inspector's filter lets everything through.
    inspector = visibility.outbound(conversation.pk, can_inspect=True)
    assert "code word at the gate" in inspector.text(SECRET_BODY)


@pytest.mark.django_db
def test_a_persons_own_personal_skill_is_shown_to_them_and_hidden_from_staff(
    alice, offered, django_user_model
):
    body = "My own checklist: water the ferns on Mondays and feed the cat before the news.\n"
    install_archive(
        make_zip({"SKILL.md": _skill_md("ferns", body)}),
        "ferns.zip",
        user=alice,
        personal=True,
    )
    conversation = Conversation.objects.create(owner=alice)
    mine = visibility.outbound(conversation.pk, can_inspect=False)
    assert mine.text(body) == body  # she wrote it
    staff = django_user_model.objects.create_user("stan", password="x", is_staff=True)
    theirs = visibility.outbound(conversation.pk, can_inspect=False, viewer_id=staff.pk)
    assert "water the ferns" not in theirs.text(body)
    # The org's skills stay hidden from her in the same conversation.
    assert "code word at the gate" not in mine.text(SECRET_BODY)
