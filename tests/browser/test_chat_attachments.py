"""Attachments and approvals in Chromium: attach by button, drop and paste; chips on the message;
refusals in words; approvals that say the action and stay after reload; blocked skills."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.pages import DOCS_SCREENSHOTS, doc_screenshot
from tests.browser.server_data import run_in_server
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

PDF = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\ntrailer << >>\n%%EOF\n"


def _pending(chat):
    return chat.page.locator("#attach-list .attachment-chip")


def _drop_or_paste(chat, how: str, name: str, text: str) -> None:
    """Drop a file on the composer, or paste it into the message box, as the browser does."""
    chat.page.evaluate(
        """([how, name, text]) => {
            const data = new DataTransfer();
            data.items.add(new File([text], name, { type: "text/plain" }));
            if (how === "drop") {
                const form = document.getElementById("composer");
                form.dispatchEvent(new DragEvent("dragover", { dataTransfer: data, bubbles: true, cancelable: true }));
                form.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }));
            } else {
                const input = document.getElementById("message-input");
                input.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
            }
        }""",
        [how, name, text],
    )


def test_a_file_attached_by_button_reaches_the_model_and_stays_on_the_message(tab, model):
    model.enqueue(Reply.text("The PDF has one page."))
    chat = tab("alice")
    chat.new_conversation()
    chat.page.locator("#attach-input").set_input_files(
        {"name": "q3 report.pdf", "mimeType": "application/pdf", "buffer": PDF}
    )
    expect(_pending(chat)).to_have_count(1)
    expect(_pending(chat)).to_contain_text("q3_report.pdf")
    chat.send("How many pages?")
    chat.wait_run_finished()
    sent = chat.transcript.locator(".row-attachments .attachment-chip")
    expect(sent).to_have_count(1)
    expect(sent).to_contain_text("q3_report.pdf")
    expect(_pending(chat)).to_have_count(0)
    expect(chat.transcript).to_contain_text("The PDF has one page.")

    content = model.requests[-1]["messages"][-1]["content"]
    assert content[0]["type"] == "document"
    assert any("in/q3_report.pdf" in b.get("text", "") for b in content)
    assert "The user attached these files" not in chat.transcript.inner_text()

    chat.reload()
    expect(chat.transcript.locator(".row-attachments .attachment-chip")).to_have_count(1)
    with chat.page.expect_download() as download:
        chat.transcript.locator(".row-attachments a").click()
    assert Path(download.value.path()).read_bytes() == PDF
    doc_screenshot(
        chat.page, "attachments-desktop", doc=DOCS_SCREENSHOTS / "attachment-desktop.png"
    )

    phone = tab("alice", width=390, height=844)
    phone.page.set_viewport_size({"width": 390, "height": 844})  # the context is alice's
    phone.open(chat.conversation_id)
    expect(phone.transcript.locator(".row-attachments .attachment-chip")).to_be_visible()
    width = phone.page.evaluate("document.documentElement.scrollWidth")
    doc_screenshot(phone.page, "attachments-phone", doc=DOCS_SCREENSHOTS / "attachment-phone.png")
    assert width <= 390, f"the chat scrolls sideways at 390 px ({width} px)"


@pytest.mark.parametrize("how", ["drop", "paste"])
def test_a_dropped_or_pasted_file_becomes_a_chip_that_can_be_removed(tab, model, how):
    chat = tab("alice")
    chat.new_conversation()
    _drop_or_paste(chat, how, f"{how}ped.txt", "some notes")
    expect(_pending(chat)).to_have_count(1)
    expect(_pending(chat)).to_contain_text(f"{how}ped.txt")
    if how == "drop":
        doc_screenshot(
            chat.page, "attachment-composer", doc=DOCS_SCREENSHOTS / "attachment-composer.png"
        )
    _pending(chat).get_by_role("button", name=f"Remove {how}ped.txt").click()
    expect(_pending(chat)).to_have_count(0)


def test_a_file_pasted_while_a_run_is_busy_waits_and_is_never_lost(tab, model):
    release, reached = model.pause()
    model.enqueue(Reply.text("First answer.", wait_for=release, reached=reached), Reply.text("ok"))
    chat = tab("alice")
    chat.new_conversation()
    chat.send("Start something long")
    assert reached.wait(10), "the first answer never started"
    _drop_or_paste(chat, "paste", "later.txt", "for the next message")
    expect(_pending(chat)).to_have_count(1)
    chat.message_box.fill("And this file")
    chat.page.get_by_role("button", name="Send").click()
    expect(chat.page.locator("body")).to_contain_text("its files stay here")
    expect(_pending(chat)).to_have_count(1)  # still waiting in the composer
    release.set()
    chat.wait_run_finished()
    chat.message_box.fill("And this file")
    chat.page.get_by_role("button", name="Send").click()
    chat.wait_run_finished(2)
    expect(chat.transcript.locator(".row-attachments .attachment-chip")).to_contain_text(
        "later.txt"
    )
    expect(_pending(chat)).to_have_count(0)


def test_a_file_over_the_limit_is_refused_in_words(tab, model):
    chat = tab("alice")
    chat.new_conversation()
    chat.page.locator("#attach-input").set_input_files(
        {"name": "huge.bin", "mimeType": "application/octet-stream", "buffer": b"\0" * (11 << 20)}
    )
    error = chat.page.locator("#attach-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("the limit is 10.0 MB per file")
    expect(_pending(chat)).to_have_count(0)


def test_an_approval_says_the_action_and_stays_after_reload(tab, model):
    model.enqueue(
        Reply.tool_use(
            "Write", {"file_path": "out/report.md", "content": "# Report\n"}, id="toolu_write01"
        ),
        Reply.text("Wrote the report."),
    )
    chat = tab("alice")
    chat.new_conversation()
    chat.send("Write the report")
    approval = chat.approval()
    expect(approval).to_contain_text("Allow writing a file?")
    expect(approval.locator(".approval-action")).to_have_text("Write out/report.md")
    expect(approval).not_to_contain_text("/workspaces/")
    why = approval.locator(".approval-why")
    expect(why.locator("p")).not_to_be_visible()
    why.locator("summary").first.click()
    expect(why).to_contain_text("Nothing allows Write calls like this")
    doc_screenshot(chat.page, "approval-desktop", doc=DOCS_SCREENSHOTS / "approval-desktop.png")

    phone = tab("alice", width=390, height=844)
    phone.page.set_viewport_size({"width": 390, "height": 844})  # the context is alice's
    phone.open(chat.conversation_id)
    expect(phone.approval()).to_be_visible()
    width = phone.page.evaluate("document.documentElement.scrollWidth")
    doc_screenshot(phone.page, "approval-phone", doc=DOCS_SCREENSHOTS / "approval-phone.png")
    phone.page.close()
    assert width <= 390, f"the approval scrolls sideways at 390 px ({width} px)"

    approval.get_by_role("button", name="Allow once").click()
    chat.wait_run_finished()
    chat.reload()
    line = chat.transcript.locator(".approval-answered")
    expect(line).to_have_count(1)
    expect(line).to_contain_text("Write out/report.md — allowed once by alice")
    expect(line.get_by_role("button")).to_have_count(0)


def test_a_skill_blocked_by_a_rule_is_not_in_the_slash_menu(tab, model, chat_server):
    chat = tab("alice")
    chat.new_conversation()
    chat.message_box.fill("/browser")
    expect(chat.page.locator("#slash-menu li[data-name=browser-probe]")).to_be_visible()
    rule = run_in_server(
        chat_server,
        "from skills_app.models import PermissionRule\n"
        "print(PermissionRule.objects.create(behavior='deny', rule_text='Skill(browser-probe)').pk)",
    ).strip()
    try:
        chat.reload()
        chat.message_box.fill("/browser")
        expect(chat.page.locator("#slash-menu li[data-name=browser-slash]")).to_be_visible()
        expect(chat.page.locator("#slash-menu li[data-name=browser-probe]")).to_have_count(0)
        chat.page.goto(f"{chat_server.url}/skills/")
        row = chat.page.locator('tr[data-skill="browser-probe"]').first
        # The catalog says it in words for the person ("denied for you"), not in rule syntax.
        expect(row).to_have_attribute("data-access", "deny")
        expect(row.locator(".access-deny")).to_have_text("denied for you")
    finally:
        run_in_server(
            chat_server,
            f"from skills_app.models import PermissionRule\nPermissionRule.objects.filter(pk={rule}).delete()",
        )
