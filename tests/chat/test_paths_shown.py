"""No server path reaches the chat (issue 29): tool cards, results and their full texts show
paths relative to the conversation's workspace, for every viewer."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from skills_app.chat import rendering
from skills_app.chat.approval_words import workspace_roots
from skills_app.models import Message, PermissionRule, Run
from skills_app.runs import supervisor as runs
from skills_app.visibility import outbound
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import use_fake_model

pytestmark = pytest.mark.django_db


def test_a_result_names_workspace_paths_relative_to_it(conversation):
    root = workspace_roots(conversation.pk)[0]
    data = {"content": f"{root}\n{root}/out/report.md written", "tool_use_id": "toolu_1"}
    shown = rendering.tool_result_context(
        conversation.pk, data, out=outbound(conversation.pk, can_inspect=False)
    )
    assert shown["content"] == ".\nout/report.md written"
    assert root not in str(shown)


def test_a_card_and_its_full_texts_show_no_server_path(alice, conversation):
    root = workspace_roots(conversation.pk)[0]
    call = {
        "type": "tool_use",
        "id": "toolu_paths",
        "name": "Bash",
        "input": {"command": f"wc -c {root}/out/notes.txt"},
    }
    Message.objects.create(
        conversation=conversation, seq=1, role="user", content=[{"type": "text", "text": "count"}]
    )
    Message.objects.create(
        conversation=conversation, seq=2, role="assistant", kind="tool_use", content=[call]
    )
    Message.objects.create(
        conversation=conversation,
        seq=3,
        role="user",
        kind="tool_result",
        content=[
            {
                "type": "tool_result",
                "tool_use_id": "toolu_paths",
                "content": f"42 {root}/out/notes.txt",
            }
        ],
    )
    client = Client()
    client.force_login(alice)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "wc -c out/notes.txt" in page and "42 out/notes.txt" in page
    assert root not in page
    for part in ("input", "result"):
        text = client.get(f"/c/{conversation.pk}/tools/toolu_paths/{part}.txt").content.decode()
        assert "out/notes.txt" in text and root not in text


# -- issue 42, point 6: what the model says about a file it wrote --------------------------------


@pytest.mark.django_db(transaction=True)
async def test_an_answer_naming_the_servers_folder_shows_the_workspace_path(
    settings, fake_anthropic, conversation, alice
):
    """A real run (SDK against the fake server, the command in the sandbox): the person reads
    `out/stats.json` in the tool card and in the answer that repeats it; the stored rows and
    the model's requests keep the server's path exactly as it was sent."""
    use_fake_model(settings, fake_anthropic)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash")
    root = str((await sync_to_async(workspace_for)(conversation.pk)).root)
    fake_anthropic.enqueue(
        Reply.tool_use(
            "Bash", {"command": "touch out/stats.json && realpath out/stats.json"}, id="toolu_rp"
        ),
        Reply.text(f"Saved the counts to `{root}/out/stats.json`.\n\nFolder: {root}"),
    )
    run = await runs.start_run(conversation.pk, "count the words", user_id=alice.pk)
    await runs.wait_for_run(run.pk, timeout=30)
    assert (await Run.objects.aget(pk=run.pk)).status == Run.DONE

    # What the model was sent: the result exactly as the command printed it.
    sent = str(fake_anthropic.requests[-1]["messages"])
    assert f"{root}/out/stats.json" in sent
    # What is stored: untouched (the auditor reads these rows).
    stored = [m.content async for m in Message.objects.filter(conversation=conversation)]
    assert f"{root}/out/stats.json" in str(stored)
    assert any(f"Saved the counts to `{root}/out/stats.json`" in str(c) for c in stored)

    # What the person reads: workspace paths, in the card and in the answer.
    client = Client()
    await sync_to_async(client.force_login)(alice)
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert "Saved the counts to <code>out/stats.json</code>" in page
    assert "Folder: ." in page
    assert root not in page
    assert "workspaces" not in page
