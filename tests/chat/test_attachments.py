"""Attaching files: who may upload and download, what lands where, and what the model is sent.

Attacks first: names that try to leave in/, links planted by a command, another person's
files, huge and numerous files, a zip bomb, a file replaced by hidden skill text, a send while
a run is busy.
"""

from __future__ import annotations

import io
import zipfile

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from skills_app.chat import actions
from skills_app.models import Attachment, AuditEvent, Conversation, Message, Run
from skills_app.runs import supervisor as runs
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, write_skills

# Only the tests that run code in other threads (async ones) need real transactions.
pytestmark = pytest.mark.django_db

PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\ntrailer << >>\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10" + b"\0" * 20


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="Files")


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _upload(client, conversation, *files):
    return client.post(
        f"/c/{conversation.pk}/attach/",
        {"file": [SimpleUploadedFile(name, data) for name, data in files]},
    )


def test_an_upload_lands_in_in_and_is_recorded_in_the_audit(alice, conversation):
    response = _upload(_client(alice), conversation, ("../../../etc/report.pdf", PDF))
    assert response.status_code == 200, response.content
    (chip,) = response.json()["attachments"]
    assert chip["path"] == "in/report.pdf" and chip["name"] == "report.pdf"
    assert (workspace_for(conversation.pk).root / "in" / "report.pdf").read_bytes() == PDF
    event = AuditEvent.objects.get(action=AuditEvent.ATTACHMENT_ADDED)
    assert event.actor == alice and event.detail["path"] == "in/report.pdf"
    assert event.detail["given_name"] == "report.pdf"  # Django already dropped the folders
    assert Attachment.objects.get().message is None  # pending until a message carries it


def test_a_name_like_a_hidden_skill_file_stays_a_plain_input(alice, conversation):
    response = _upload(_client(alice), conversation, ("skills/pdf/SKILL.md", b"# mine"))
    assert response.json()["attachments"][0]["path"] == "in/SKILL.md"
    assert not (workspace_for(conversation.pk).skills_dir / "pdf").exists()


def test_another_user_can_neither_upload_nor_download(alice, bob, conversation):
    assert _upload(_client(bob), conversation, ("a.txt", b"x")).status_code == 404
    chip = _upload(_client(alice), conversation, ("a.txt", b"mine")).json()["attachments"][0]
    assert _client(bob).get(chip["url"]).status_code == 404
    assert _client(bob).post(chip["url"] + "remove/").status_code == 404
    response = _client(alice).get(chip["url"])
    assert response.status_code == 200 and b"".join(response.streaming_content) == b"mine"


def test_a_download_never_follows_a_link_a_command_planted(alice, conversation, tmp_path):
    chip = _upload(_client(alice), conversation, ("a.txt", b"mine")).json()["attachments"][0]
    target = workspace_for(conversation.pk).root / "in" / "a.txt"
    target.unlink()
    (tmp_path / "server-secret").write_text("SECRET_KEY=abc")
    target.symlink_to(tmp_path / "server-secret")
    response = _client(alice).get(chip["url"])
    assert response.status_code == 404
    assert b"SECRET_KEY" not in response.content


def test_a_file_replaced_by_hidden_skill_text_is_not_served(alice, conversation):
    chip = _upload(_client(alice), conversation, ("notes.md", b"mine")).json()["attachments"][0]
    (workspace_for(conversation.pk).root / "in" / "notes.md").write_text("HIDDEN SKILL BODY")
    response = _client(alice).get(chip["url"])
    assert response.status_code == 409
    assert b"HIDDEN SKILL BODY" not in response.content
    assert b"changed in the workspace after you attached it" in response.content


def test_too_large_and_too_many_files_are_refused_clearly(alice, conversation, settings):
    settings.ATTACHMENT_MAX_FILE_BYTES = 2048
    settings.ATTACHMENT_MAX_FILES = 2
    client = _client(alice)
    big = _upload(client, conversation, ("big.txt", b"x" * 4096))
    assert big.status_code == 400 and "the limit is 2 KB per file" in big.json()["error"]
    many = _upload(client, conversation, *[(f"{i}.txt", b"x") for i in range(3)])
    assert many.status_code == 400 and "At most 2 files" in many.json()["error"]
    assert _upload(client, conversation, ("1.txt", b"x"), ("2.txt", b"x")).status_code == 200
    third = _upload(client, conversation, ("3.txt", b"x"))
    assert "2 already attached" in third.json()["error"]
    assert not Attachment.objects.filter(name="big.txt").exists()
    assert sorted(p.name for p in (workspace_for(conversation.pk).root / "in").iterdir()) == [
        "1.txt",
        "2.txt",
    ]


def test_a_declared_huge_body_is_refused_before_its_files_are_read(alice, conversation):
    response = _client(alice).post(
        f"/c/{conversation.pk}/attach/",
        data=b"--x--",
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH=str(10**12),
    )
    assert response.status_code == 413 and "at most" in response.json()["error"]


def test_a_zip_bomb_is_stored_as_it_came_never_expanded(alice, conversation):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bomb:
        bomb.writestr("word/document.xml", b"\0" * (200 * 1024 * 1024))
    data = buffer.getvalue()
    assert len(data) < 1024 * 1024
    chip = _upload(_client(alice), conversation, ("bomb.docx", data)).json()["attachments"][0]
    assert chip["size"] == len(data)
    assert (workspace_for(conversation.pk).root / chip["path"]).stat().st_size == len(data)


def test_an_image_that_is_not_one_is_refused(alice, conversation):
    response = _upload(_client(alice), conversation, ("cat.png", b"not an image"))
    assert response.status_code == 400
    assert "named like a PNG image but its content is not" in response.json()["error"]


# -- sending ----------------------------------------------------------------------------------


async def _send(conversation, user, text, ids):
    await actions.perform(
        "send",
        {"text": text, "attachments": [str(i) for i in ids]},
        conversation_id=conversation.pk,
        user_id=user.pk,
    )
    run = await Run.objects.filter(conversation=conversation).order_by("-pk").afirst()
    await runs.wait_for_run(run.pk, timeout=30)
    return run


@pytest.mark.django_db(transaction=True)
async def test_the_model_gets_the_blocks_and_the_paths(alice, conversation, fake_model):
    client = await sync_to_async(_client)(alice)
    uploaded = await sync_to_async(_upload)(
        client, conversation, ("report.pdf", PDF), ("chart.png", PNG), ("data.csv", b"a,b\n")
    )
    ids = [c["id"] for c in uploaded.json()["attachments"]]
    fake_model.enqueue(Reply.text("Read them."))
    await _send(conversation, alice, "What is in these?", ids)

    (request,) = accepted(fake_model)
    content = request["messages"][-1]["content"]
    kinds = [b["type"] for b in content]
    assert kinds[:2] == ["document", "image"]
    assert content[0]["source"]["media_type"] == "application/pdf"
    note = next(b["text"] for b in content if b["type"] == "text" and "attached" in b["text"])
    for path in ("in/report.pdf", "in/chart.png", "in/data.csv"):
        assert path in note
    assert str(workspace_for(conversation.pk).root) not in str(content)  # never absolute
    assert content[-1]["text"] == "What is in these?"
    sent = await sync_to_async(list)(Attachment.objects.filter(message__isnull=False))
    assert len(sent) == 3 and sent[0].sent_at is not None


@pytest.mark.django_db(transaction=True)
async def test_the_message_shows_downloadable_chips_after_reload(alice, conversation, fake_model):
    client = await sync_to_async(_client)(alice)
    uploaded = await sync_to_async(_upload)(client, conversation, ("report.pdf", PDF))
    chip = uploaded.json()["attachments"][0]
    fake_model.enqueue(Reply.text("ok"))
    await _send(conversation, alice, "Summarise it", [chip["id"]])
    page = (await sync_to_async(client.get)(f"/c/{conversation.pk}/")).content.decode()
    assert f'href="{chip["url"]}"' in page and "report.pdf" in page
    assert "The user attached these files" not in page  # the note is for the model only


@pytest.mark.django_db(transaction=True)
async def test_a_send_refused_while_a_run_is_busy_keeps_the_files(alice, conversation):
    client = await sync_to_async(_client)(alice)
    chip = (await sync_to_async(_upload)(client, conversation, ("a.txt", b"x"))).json()[
        "attachments"
    ][0]
    await Run.objects.acreate(conversation=conversation, status=Run.RUNNING, started_by=alice)
    with pytest.raises(actions.ActionError, match="its files stay here"):
        await actions.perform(
            "send",
            {"text": "go", "attachments": str(chip["id"])},
            conversation_id=conversation.pk,
            user_id=alice.pk,
        )
    attachment = await Attachment.objects.aget(pk=chip["id"])
    assert attachment.message_id is None
    assert not await Message.objects.filter(conversation=conversation, kind="attachments").aexists()


@pytest.mark.django_db(transaction=True)
async def test_another_users_pending_file_cannot_be_sent(alice, bob, conversation):
    theirs = await Conversation.objects.acreate(owner=bob, title="Bob's")
    client = await sync_to_async(_client)(bob)
    chip = (await sync_to_async(_upload)(client, theirs, ("bob.txt", b"bob's"))).json()[
        "attachments"
    ][0]
    with pytest.raises(actions.ActionError, match="no longer waiting"):
        await actions.perform(
            "send",
            {"text": "go", "attachments": [chip["id"]]},
            conversation_id=conversation.pk,
            user_id=alice.pk,
        )


@pytest.mark.parametrize("bad", [[True], ["1; DROP"], [{"id": 1}], list(range(50))])
@pytest.mark.django_db(transaction=True)
async def test_bad_attachment_ids_are_refused(alice, conversation, bad):
    with pytest.raises(actions.ActionError):
        await actions.perform(
            "send",
            {"text": "go", "attachments": bad},
            conversation_id=conversation.pk,
            user_id=alice.pk,
        )


# -- the example flows under the demo model ---------------------------------------------------

FLOW_SKILLS = {
    "pdf": """\
        ---
        name: pdf
        description: Reads PDF files and reports on them.
        ---
        Check the PDF first:

        ```bash
        python3 -c "import sys; d=open(sys.argv[1],'rb').read(); print('PDF' if d.startswith(b'%PDF-') else 'NOT A PDF', d.count(b'/Type /Page'), 'page(s)')" input.pdf
        ```
        """,
    "docx": """\
        ---
        name: docx
        description: Reads Word documents.
        ---
        ```bash
        python3 -c "import sys,zipfile; print(len(zipfile.ZipFile(sys.argv[1]).namelist()), 'parts')" document.docx
        ```
        """,
    "xlsx": """\
        ---
        name: xlsx
        description: Reads spreadsheets.
        ---
        ```bash
        python3 -c "import sys,zipfile; print(sorted(zipfile.ZipFile(sys.argv[1]).namelist())[0])" workbook.xlsx
        ```
        """,
}


def _office(kind: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr(f"{'word' if kind == 'docx' else 'xl'}/main.xml", "<x/>")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("skill", "name", "data", "expect"),
    [
        ("pdf", "q3-report.pdf", PDF, "PDF 1 page(s)"),
        ("docx", "letter.docx", _office("docx"), "2 parts"),
        ("xlsx", "sales.xlsx", _office("xlsx"), "[Content_Types].xml"),
    ],
    # Named by the skill: the zips carry the time they were made, and pytest-xdist's workers
    # must collect the same test ids.
    ids=["pdf", "docx", "xlsx"],
)
@pytest.mark.django_db(transaction=True)
async def test_the_demo_runs_the_example_flow_on_the_attached_file(
    alice, conversation, settings, tmp_path, skill, name, data, expect
):
    from skills_app.models import PermissionRule

    settings.ANTHROPIC_API_KEY = ""
    settings.MODEL_CLIENT = "tests.support.loop_helpers.instant_demo_client"
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills", FLOW_SKILLS)]
    settings.RATE_LIMIT_MESSAGES_PER_MINUTE = 1000
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash(python3 *)")
    client = await sync_to_async(_client)(alice)
    chip = (await sync_to_async(_upload)(client, conversation, (name, data))).json()["attachments"][
        0
    ]
    run = await _send(conversation, alice, f"/{skill}", [chip["id"]])
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == Run.DONE, run.error
    rows = await sync_to_async(list)(Message.objects.filter(conversation=conversation))
    uses = [b for r in rows for b in r.content if b.get("type") == "tool_use"]
    assert any(f"in/{name}" in u["input"].get("command", "") for u in uses), uses
    results = [b for r in rows for b in r.content if b.get("type") == "tool_result"]
    assert any(expect in str(b["content"]) and not b.get("is_error") for b in results), results


def test_the_markdown_export_lists_the_files_of_a_message(alice, conversation):
    from skills_app.audit.markdown_export import export_markdown_text

    info = {"id": 1, "name": "q3.pdf", "path": "in/q3.pdf", "media_type": "application/pdf"}
    Message.objects.create(
        conversation=conversation,
        seq=1,
        role="user",
        kind="attachments",
        content=[{"type": "text", "text": "Attached files: in/q3.pdf"}],
        meta={"attachments": [info]},
    )
    text = export_markdown_text(conversation, include_hidden=False)
    assert "## You (files)\n\n- `in/q3.pdf`" in text
