"""The review end to end in Chromium, at desktop and phone width.

Mona (a skill manager) uploads v2 of an organisation skill from the Skills page and submits it;
Rita (another skill manager: the live server wants four eyes) opens its review page, reads the
diff of its script against the live v1 and the command manifest, and approves it. Alice (a
chatter) opens the skill's page from the `/` menu, runs the skill: its reviewed command runs
without a prompt, and a command that quotes the instructions is refused in plain words. Audrey
(an auditor) finds both decisions, and Rita as the reviewer, on the audit's decisions page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.browser.axe import violations
from tests.browser.live_server import LiveServer
from tests.browser.pages import screenshot
from tests.browser.server_data import publish, run_in_server, upload_draft
from tests.support.fake_anthropic import Reply

pytestmark = pytest.mark.browser

SIZES = {"desktop": (1440, 900), "phone": (390, 844)}
SCRIPT_V1 = 'import sys\nprint("Hello, " + " ".join(sys.argv[1:]) + "! Have a fine day.")\n'
SCRIPT_V2 = 'import sys\nprint("Hello, " + " ".join(sys.argv[1:]) + "! Welcome aboard.")\n'
REFUSAL = (
    "this command quotes the skill's instructions and is not among its reviewed commands; "
    "ask a skill manager"
)
_DISABLE = """
from skills_app.models import SkillPackage
from skills_app.registry.uploads import set_enabled
for package in SkillPackage.objects.filter(name__in={names!r}, owner=None):
    set_enabled(package, False)
"""


def marker(label: str) -> str:
    return f"GREET-{label.upper()}-BODY-7c1e: greet every person by the exact name they give"


def skill_md(name: str, label: str) -> str:
    return (
        f"---\nname: {name}\n"
        "description: Greets people by name with a cheerful line from the organisation.\n"
        'argument-hint: "[name]"\n'
        # Only people start it: other tests' models never see it in their catalog.
        "disable-model-invocation: true\n---\n\n# Greeting\n\n"
        f"{marker(label)}, and add a cheery line.\n\n"
        "Run exactly this command, with the person's name:\n\n"
        '```bash\npython3 ${CLAUDE_SKILL_DIR}/scripts/greet.py "$ARGUMENTS"\n```\n\n'
        "Then answer with what it printed.\n"
    )


@pytest.fixture
def skill(chat_server: LiveServer, request) -> Iterator[str]:
    """The label and a live v1 of its skill (seeded), disabled again afterwards."""
    label = request.param
    name = f"greet-{label}"
    upload_draft(
        chat_server,
        {f"{name}/SKILL.md": skill_md(name, label), f"{name}/scripts/greet.py": SCRIPT_V1},
    )
    publish(chat_server, name)
    try:
        yield label
    finally:
        run_in_server(chat_server, _DISABLE.format(names=[name]))


def greeter(label: str):
    """The model: run the body's command, then try to copy the instructions, then answer."""

    def respond(request) -> Reply:
        last = request["messages"][-1]
        blocks = last["content"] if isinstance(last["content"], list) else []
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
        results = " ".join(str(b.get("content")) for b in blocks if b.get("type") == "tool_result")
        hidden = next((t for t in texts if t.startswith("Base directory")), None)
        if hidden is not None:
            command = re.search(r"```bash\n(.+?)\n```", hidden, re.S).group(1).strip()
            return Reply.tool_use("Bash", {"command": command}, text="Running the greeting.")
        if "Hello, " in results:
            copy = f"echo '{marker(label)}, and add a cheery line.' > out/instructions.txt"
            return Reply.tool_use("Bash", {"command": copy})
        return Reply.text("Ada Lovelace was greeted: Hello, Ada Lovelace! Welcome aboard.")

    return respond


@pytest.mark.parametrize("skill", list(SIZES), indirect=True)
def test_upload_review_approve_run_refuse_and_audit(tab, model, chat_server, tmp_path, skill):
    label = skill
    name = f"greet-{label}"
    width, height = SIZES[label]
    base = chat_server.url

    # -- Mona uploads v2 (its script changed) for everyone and submits it ---------------------
    folder = tmp_path / name
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_md(name, label))
    (folder / "scripts" / "greet.py").write_text(SCRIPT_V2)
    manager = tab("mona", width=width, height=height).page
    manager.goto(f"{base}/skills/")
    form = manager.locator("#org-upload-form")
    form.get_by_label("Folder").set_input_files(folder)
    form.get_by_role("button", name="Upload draft").click()
    # The upload redirects to the version's page (issue 42): a reload reads it, sends nothing.
    expect(manager).to_have_url(re.compile(r"/skills/versions/\d+/review/#review$"))
    expect(manager.get_by_role("heading", name=f"Review {name} v2")).to_be_visible()
    report = manager.locator("#review-notice")
    expect(report).to_contain_text(f"Installed {name} version 2 (organisation-wide")
    expect(report).to_contain_text("Submitted for review.")
    expect(report).to_contain_text("Lint found nothing to fix.")
    # A success is green, not the demo warning's yellow.
    background = report.evaluate("(el) => getComputedStyle(el).backgroundColor")
    assert background in ("rgb(233, 247, 236)", "rgb(28, 51, 34)"), background
    screenshot(manager, f"50-review-upload-{label}")
    assert violations(manager) == []
    manager.reload()
    expect(manager.get_by_role("heading", name=f"Review {name} v2")).to_be_visible()
    expect(report).to_have_count(0)
    # She cannot approve her own upload here.
    expect(manager.locator("#approve-refusal")).to_contain_text("someone other than")

    # -- Rita reviews: the script's diff, the manifest, then approves -------------------------
    reviewer = tab("rita", width=width, height=height).page
    reviewer.goto(f"{base}/skills/#review-queue")
    reviewer.locator("#review-queue-list").get_by_role("link", name=f"{name} v2").click()
    expect(reviewer.get_by_role("heading", name=f"Review {name} v2")).to_be_visible()
    diff = reviewer.locator('.file-diff[data-path="scripts/greet.py"]')
    expect(diff.locator(".diff-del")).to_contain_text("Have a fine day.")
    expect(diff.locator(".diff-add")).to_contain_text("Welcome aboard.")
    expect(reviewer.locator("#version-digest")).to_be_visible()
    entry = reviewer.locator('#manifest-table .manifest-entry[data-kind="command"]')
    expect(entry).to_contain_text('python3 ${CLAUDE_SKILL_DIR}/scripts/greet.py "$ARGUMENTS"')
    expect(entry).to_contain_text("Runs the skill's own Python script scripts/greet.py")
    expect(entry).to_contain_text("consented: runs without asking")
    diff.scroll_into_view_if_needed()
    screenshot(reviewer, f"51-review-page-{label}")
    approve = reviewer.locator("#approve-form")
    approve.get_by_label("Comment (optional)").fill("Read the script and the command: fine.")
    approve.get_by_role("button", name="Approve").click()
    expect(reviewer.locator("#review-notice")).to_have_text(
        "It is now the active version for everyone."
    )
    expect(reviewer.locator("#review-trail")).to_contain_text("v2 approved by rita")
    expect(reviewer.locator("#review-trail")).to_contain_text("v2 made active by rita")
    screenshot(reviewer, f"52-review-approved-{label}")

    # -- Alice finds the skill's page from the / menu, then runs it --------------------------
    model.fake.set_responder(greeter(label))
    chat = tab("alice", width=width, height=height)
    page = chat.page
    chat.new_conversation()
    chat.message_box.fill(f"/{name}")
    option = page.locator(f'.slash-menu li[data-name="{name}"]')
    expect(option).to_be_visible()
    # "About" in an option opens the page on a click (no link inside an option: axe).
    about = option.locator(".option-about")
    expect(about).to_have_attribute("title", f"About {name} (opens its page in a new tab)")
    with page.context.expect_page() as opened:
        about.click()
    skill_page = opened.value
    skill_page.wait_for_load_state()
    expect(skill_page.locator("#skill-reviewed")).to_contain_text("rita on ")
    expect(skill_page.locator("#manifest-words")).to_contain_text(
        "Runs the skill's own Python script scripts/greet.py"
    )
    expect(skill_page.locator("#manifest-words")).to_contain_text("runs without asking you")
    assert marker(label) not in skill_page.content()
    screenshot(skill_page, f"53-skill-page-{label}")
    skill_page.close()

    chat.send(f"/{name} Ada Lovelace")
    chat.wait_run_finished(timeout=30)
    expect(chat.approval()).to_have_count(0)  # nobody was asked anything
    cards = chat.transcript.locator('.tool[data-tool="Bash"]')
    expect(cards).to_have_count(2)
    expect(cards.nth(0).locator(".tool-result")).to_contain_text("Hello, Ada Lovelace")
    refused = cards.nth(1).locator(".tool-result")
    refused.locator("summary").click()
    expect(refused).to_contain_text(REFUSAL)
    assert marker(label) not in page.content()
    expect(chat.transcript.locator(".row-assistant .md").last).to_contain_text("was greeted")
    screenshot(page, f"54-reviewed-run-{label}")

    # -- Audrey finds the decisions and who reviewed them -----------------------------------
    auditor = tab("audrey", width=width, height=height).page
    auditor.goto(f"{base}/audit/decisions/?reviewer=rita&skill={name}")
    rows = auditor.locator("#decisions tbody tr")
    allowed = auditor.locator('#decisions tr[data-decision="allow"][data-source="review"]')
    expect(allowed).to_contain_text(f"allowed by the review of {name} v2 by rita")
    expect(auditor.locator('#decisions tr[data-decision="refused"]')).to_contain_text(REFUSAL)
    expect(rows).to_have_count(2)
    screenshot(auditor, f"55-audit-decisions-{label}")
