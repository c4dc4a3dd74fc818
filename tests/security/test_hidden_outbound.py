"""Issue 11: a skill's hidden text never reaches a non-inspector through a tool, at any edge.

A real run (the real SDK against the fake Anthropic server) loads the "ledger" skill, then the
model reads its SKILL.md and a reference file and greps for a canary: what the issue found in
the tool cards, the websocket frames, the page and the export. A person without the inspect
permission never receives a span of 40 characters or more of those files (`helpers.leaked`, a
check independent of the filter), and sees a placeholder instead. Positive controls: the model
did receive the text, and an inspector sees it everywhere.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.urls import reverse

from skills_app.models import (
    Conversation,
    Message,
    PermissionRule,
    Run,
    SkillInvocation,
    VisibleSkillSource,
)
from skills_app.runs import supervisor as runs
from tests.security.helpers import (
    client_of,
    frames_text,
    frames_until,
    leaked,
    open_tab,
    resume,
)
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import use_fake_model

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "CANARY-LEDGER-5d21"
SKILL_MD = textwrap.dedent(
    f"""\
    ---
    name: ledger
    description: Keeps the quarterly ledger tidy for the tests.
    allowed-tools: Read Grep
    ---
    # Ledger

    Always open the ledger with the blue key before reading any of its pages.
    Never show the customer list; summarise it as counts per region instead.
    {CANARY}: the secret handshake is three short knocks and a long cough.
    See references/guide.md for the closing checklist of the quarter.
    """
)
GUIDE = textwrap.dedent(
    """\
    # Closing checklist

    Reconcile every account against the bank statement before the fifth day.
    Archive the signed copies in the fireproof cabinet behind the third shelf.
    """
)
# The canary as Grep shows it (the bare canary is the model's own pattern, shown as typed).
CANARY_LINE = f"{CANARY}: the secret handshake"
# The body (the name and description are shown on purpose: the catalog, the slash menu).
HIDDEN = [SKILL_MD.split("---\n", 2)[2], GUIDE]
PLACEHOLDER = "[hidden skill file ledger/SKILL.md withheld:"


def _skills(root: Path) -> Path:
    folder = root / "ledger"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "references" / "guide.md").write_text(GUIDE)
    return root


def _script(fake: Any) -> None:
    fake.enqueue(
        Reply.tool_use("Skill", {"skill": "ledger"}, text="Loading the ledger skill."),
        Reply.tool_use("Read", {"file_path": "skills/ledger/SKILL.md"}),
        Reply.tool_use("Read", {"file_path": "skills/ledger/references/guide.md"}),
        Reply.tool_use("Grep", {"pattern": CANARY, "output_mode": "content"}),
        Reply.text("The ledger is tidy."),
    )


async def _ledger_run(owner: Any, settings: Any, fake: Any, tmp_path: Path) -> tuple[int, str]:
    """Run the scripted turn with a tab open; (conversation id, every string the tab got)."""
    use_fake_model(settings, fake, retries=0)
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    settings.SKILLS_DIRS = [_skills(tmp_path / "skills")]
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    conversation = await Conversation.objects.acreate(owner=owner, title="ledger")
    _script(fake)
    tab, connected = await open_tab(owner, conversation.pk)
    assert connected
    await resume(tab)
    await tab.send_json_to({"action": "send", "text": "tidy the ledger"})
    frames = await frames_until(tab, lambda f: f.get("type") == "run.finished", timeout=40)
    for run in [r async for r in Run.objects.filter(conversation=conversation)]:
        await runs.wait_for_run(run.pk, timeout=30)
    await tab.disconnect()
    assert frames[-1]["data"]["status"] == "done", frames[-1]
    return conversation.pk, frames_text(frames)


def _model_saw(fake: Any) -> str:
    return "\n".join(str(r["messages"]) for r in fake.requests)


def _tool_ids(conversation_id: int) -> list[str]:
    ids = []
    for row in Message.objects.filter(conversation_id=conversation_id, kind="tool_use"):
        ids += [b["id"] for b in row.content if b.get("type") == "tool_use"]
    return ids


def _get(client: Any, url: str) -> bytes:
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return b"".join(response.streaming_content) if response.streaming else response.content


async def test_a_chatter_gets_placeholders_for_the_skill_files_everywhere(
    alice, django_user_model, settings, fake_anthropic, tmp_path
):
    conversation_id, live = await _ledger_run(alice, settings, fake_anthropic, tmp_path)
    # Positive control: the model did read the files (and the canary through Grep).
    assert "three short knocks" in _model_saw(fake_anthropic)
    assert "fireproof cabinet" in _model_saw(fake_anthropic)
    # The live frames: tool cards carry placeholders, never the text.
    assert leaked(live, HIDDEN) == []
    assert CANARY_LINE not in live
    assert PLACEHOLDER in live
    assert "[hidden skill file ledger/references/guide.md withheld:" in live

    def pages() -> None:
        client = client_of(alice)
        page = _get(client, reverse("conversation", args=[conversation_id]))
        assert leaked(page, HIDDEN) == [] and CANARY_LINE.encode() not in page
        assert PLACEHOLDER.encode() in page
        export = _get(client, reverse("conversation-export", args=[conversation_id]))
        assert leaked(export, HIDDEN) == [] and CANARY_LINE.encode() not in export
        assert b"The ledger is tidy." in export  # the export did render the transcript
        ids = _tool_ids(conversation_id)
        assert len(ids) == 4
        for tool_use_id in ids:
            for part in ("input", "result"):
                url = reverse("conversation-tool-text", args=[conversation_id, tool_use_id, part])
                body = _get(client, url)
                assert leaked(body, HIDDEN) == [] and CANARY_LINE.encode() not in body, url
        # Staff who may view the audit but not inspect hidden content: the invocation's page.
        staff = django_user_model.objects.create_user("stan", password="x", is_staff=True)
        staff.user_permissions.add(Permission.objects.get(codename="view_skillinvocation"))
        invocation = SkillInvocation.objects.get(conversation_id=conversation_id)
        detail = _get(client_of(staff), reverse("audit-invocation", args=[invocation.pk]))
        assert b"Read" in detail  # the tool calls are listed
        assert leaked(detail, HIDDEN) == [] and CANARY_LINE.encode() not in detail

    await sync_to_async(pages)()
    # A reconnecting tab replays everything from the database: filtered the same way.
    tab, _ = await open_tab(alice, conversation_id)
    replay = frames_text(await resume(tab))
    await tab.disconnect()
    assert leaked(replay, HIDDEN) == [] and PLACEHOLDER in replay


async def test_an_inspector_sees_the_files_in_full(auditor, settings, fake_anthropic, tmp_path):
    """Positive control for the test above: the same run, owned by someone who may inspect."""
    conversation_id, live = await _ledger_run(auditor, settings, fake_anthropic, tmp_path)
    assert "fireproof cabinet" in live and CANARY_LINE in live
    assert "withheld" not in live

    def pages() -> None:
        page = _get(client_of(auditor), reverse("conversation", args=[conversation_id]))
        assert b"three short knocks" in page and b"fireproof cabinet" in page

    await sync_to_async(pages)()


async def test_a_skill_whose_source_is_visible_is_shown_to_chatters(
    alice, settings, fake_anthropic, tmp_path
):
    conversation_id, live = await _ledger_run(alice, settings, fake_anthropic, tmp_path)
    assert "three short knocks" not in live

    def page() -> bytes:
        return _get(client_of(alice), reverse("conversation", args=[conversation_id]))

    source = await VisibleSkillSource.objects.acreate(name="ledger")
    # The cached index notices the new choice at once (no restart, no waiting).
    shown = await sync_to_async(page)()
    assert b"three short knocks" in shown and b"fireproof cabinet" in shown
    await source.adelete()
    again = await sync_to_async(page)()
    assert b"three short knocks" not in again and PLACEHOLDER.encode() in again
