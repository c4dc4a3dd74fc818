"""The bundled example skills, one per execution pattern, run end to end in every delivery profile.

A scripted model plays each skill the way a real one would: it loads the skill with the profile's
tool, reads the instructions where that profile puts them, and follows them (reads a reference
file, runs a script, writes and runs a script that imports the skill's library, delegates to a
forked skill). The tests then check what the model was given and what the skill left behind.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from skills_app.models import Approval, Conversation, PermissionRule, Run, SkillInvocation
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, rows, run_turn, use_fake_model

pytestmark = pytest.mark.django_db(transaction=True)

META, TOOL_RESULT, SYSTEM = "meta-message", "tool-result", "system-prompt"
PROFILES = [META, TOOL_RESULT, SYSTEM]
HIDDEN_PREFIX = "Base directory for this skill: "

# One sentence of each body: it must reach the model once, and never a visible row.
PHRASES = {
    "release-notes": "Release notes are for the people who use the software",
    "style-guide": "Read only the ones the task needs",
    "text-stats": "do not recompute the figures yourself",
    "table-kit": "Do not edit or copy the library",
    "release-prep": "Do not skip the scout step, even for a small release",
    "change-scout": "Your final answer is all that the caller sees",
}

Step = Callable[[dict[str, Any]], Reply]


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class ScriptedModel:
    """Plays one delivery profile: which tool loads a skill, runs a command, and where the body is."""

    def __init__(self, profile: str) -> None:
        self.profile = profile

    def load(self, skill: str, args: str = "") -> Reply:
        if self.profile == META:
            return Reply.tool_use("Skill", {"skill": skill, "args": args})
        if self.profile == TOOL_RESULT:
            return Reply.tool_use("load_skill", {"name": skill})  # the design has no arguments
        return Reply.tool_use("skill_load", {"skill": skill, "args": args})

    def resolve(self, text: str, skill: str) -> str:
        """What a model makes of the body's paths: the tool-result design returns the body as
        written, so `${CLAUDE_SKILL_DIR}` is left for the model, which finds the skill where the
        design keeps skills, `skills/<name>` in the workspace (its working folder)."""
        if self.profile == TOOL_RESULT:
            return text.replace("${CLAUDE_SKILL_DIR}", f"skills/{skill}")
        return text

    def shell(self, skill: str, command: str, outputs: tuple[str, ...] = ()) -> Reply:
        if self.profile == SYSTEM:
            payload = {"skill": skill, "command": command, "output_files": list(outputs)}
            return Reply.tool_use("skill_run", payload)
        return Reply.tool_use("Bash", {"command": command})

    def body(self, request: dict[str, Any], skill: str) -> str | None:
        """The skill's instructions where this profile delivers them, or None."""
        if self.profile == SYSTEM:
            pattern = rf'<loaded_skill name="{skill}">\n(.*?)\n</loaded_skill>'
            found = re.search(pattern, request.system_text, re.S)
            return found.group(1) if found else None
        for message in request["messages"]:
            if message["role"] != "user":
                continue
            for block in message["content"]:
                if self.profile == TOOL_RESULT and block["type"] == "tool_result":
                    content = block["content"]
                    if isinstance(content, str) and content.startswith(f'<skill name="{skill}">'):
                        return content
                if self.profile == META and block["type"] == "text":
                    first_line = block["text"].split("\n", 1)[0]
                    if first_line.startswith(HIDDEN_PREFIX) and first_line.endswith(f"/{skill}"):
                        return block["text"]
        return None

    def output(self, request: dict[str, Any]) -> str:
        """The text of the last tool result (stdout for `skill_run`)."""
        text = last_result(request)
        if self.profile == SYSTEM and text.startswith("{"):
            return json.loads(text)["stdout"]
        return text


def last_result(request: dict[str, Any]) -> str:
    blocks = [b for b in request["messages"][-1]["content"] if b["type"] == "tool_result"]
    if not blocks:
        return ""
    content = blocks[-1]["content"]
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content)
    return str(content)


def first_prompt(request: Any) -> str:
    """A subagent's task: its first message, and (toolset profile) the skill in its system."""
    return dumps(request["messages"][0]) + request.system_text


def follow(fake: Any, steps: list[Step], child_steps: list[Step] | None = None) -> None:
    """Answer the n-th model call of the parent (and of a forked subagent) with steps[n]."""

    def respond(request: dict[str, Any]) -> Reply:
        script = steps
        if child_steps is not None and PHRASES["change-scout"] in first_prompt(request):
            script = child_steps
        turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
        try:
            return script[turn](request)
        except Exception as exc:  # surfaces in the final answer instead of a bare HTTP 500
            return Reply.text(f"SCRIPT FAILED at turn {turn}: {exc!r}")

    fake.set_responder(respond)


@pytest.fixture
def fake(settings, fake_anthropic):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = []  # only the bundled skills
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    return fake_anthropic


@pytest.fixture(params=PROFILES)
def profile(request):
    return request.param


@pytest.fixture
def model(profile):
    return ScriptedModel(profile)


@pytest.fixture
def conversation(alice, profile):
    return Conversation.objects.create(owner=alice, title=f"examples ({profile})", profile=profile)


@pytest.fixture
def workspace(conversation):
    return workspace_for(conversation.pk)


def assert_delivered_once(model: ScriptedModel, requests: list[Any], skill: str) -> None:
    """Layer 1 only before loading; afterwards the body once, in the profile's place."""
    phrase = PHRASES[skill]
    assert phrase not in dumps(requests[0]), "the body was sent before the skill was loaded"
    loaded = [r for r in requests if phrase in dumps(r)]
    assert loaded, f"the body of {skill} never reached the model"
    for request in loaded:
        assert dumps(request).count(phrase) == 1
        delivered = model.body(request, skill)
        assert delivered is not None and phrase in delivered
        if model.profile == SYSTEM:
            assert phrase not in dumps(request["messages"])
        else:
            assert phrase not in request.system_text


def assert_hidden_from_transcript(conversation: Conversation, *skills: str) -> None:
    stored = rows(conversation)
    visible = dumps([m.content for m in stored if not m.is_meta])
    for skill in skills:
        assert PHRASES[skill] not in visible
    assert any(m.kind == "skill_status" and not m.is_meta for m in stored)


def final_text(conversation: Conversation) -> str:
    """The parent's last answer (a subagent's rows are linked to their own run)."""
    answers = [
        m for m in rows(conversation) if m.role == "assistant" and "subagent_run" not in m.meta
    ]
    return answers[-1].content[0]["text"]


async def invocations(conversation: Conversation) -> dict[str, str]:
    found = SkillInvocation.objects.filter(conversation=conversation)
    return {row.skill: row.decision async for row in found}


def test_bundled_skills_hold_the_phrases_the_tests_look_for():
    root = Path(django_settings.BUNDLED_SKILLS_DIR)
    for skill, phrase in PHRASES.items():
        assert phrase in (root / skill / "SKILL.md").read_text(), skill


# -- pure instructions ---------------------------------------------------------------------

NOTES = (
    "## 2.1\n\n**New**\n- You can export reports as CSV files.\n\n**Fixed**\n"
    "- Uploading an empty file no longer shows an error page.\n\nLeft out as internal: Bump the CI image."
)


async def test_release_notes_instructions_shape_the_answer(fake, model, conversation, alice):
    def answer(request):
        body = model.body(request, "release-notes") or ""
        # The skill says to drop internal noise and name what was dropped.
        if "Drop internal noise" not in body:
            return Reply.text("I did not get the release-notes instructions.")
        return Reply.text(NOTES)

    follow(fake, [lambda r: model.load("release-notes", "2.1"), answer])
    text = "Release notes for 2.1: Add CSV export; Fix crash on empty upload; Bump the CI image"
    run = await run_turn(conversation, text, alice)

    assert run.status == Run.DONE
    assert await sync_to_async(final_text)(conversation) == NOTES
    assert_delivered_once(model, accepted(fake), "release-notes")
    await sync_to_async(assert_hidden_from_transcript)(conversation, "release-notes")
    assert await invocations(conversation) == {"release-notes": "allowed"}


# -- reference documents -------------------------------------------------------------------


async def test_style_guide_routes_the_model_to_the_one_reference_it_needs(
    fake, model, conversation, alice
):
    def pick_reference(request):
        body = model.body(request, "style-guide") or ""
        row = next(line for line in body.splitlines() if line.startswith("| voice, tone"))
        path = model.resolve(re.search(r"`([^`]+)`", row).group(1), "style-guide")
        if model.profile == SYSTEM:
            relative = path.split("/style-guide/", 1)[1]
            return Reply.tool_use("skill_select_docs", {"skill": "style-guide", "docs": [relative]})
        return Reply.tool_use("Read", {"file_path": path})

    def review(request):
        rules = request.system_text if model.profile == SYSTEM else last_result(request)
        if '"use" not "utilise"' not in rules:
            return Reply.text("I could not read the tone rules.")
        return Reply.text('Use the export button.\n\n- "utilise" becomes "use"; "Simply" goes.')

    follow(fake, [lambda r: model.load("style-guide"), pick_reference, review])
    run = await run_turn(conversation, 'Review in our style: "Simply utilise export!"', alice)

    assert run.status == Run.DONE
    assert (await sync_to_async(final_text)(conversation)).startswith("Use the export button.")
    sent = accepted(fake)
    assert_delivered_once(model, sent, "style-guide")
    tone = "Plain words first"
    if model.profile == SYSTEM:
        assert tone in sent[-1].system_text and tone not in dumps(sent[-1]["messages"])
        assert (
            '<skill_document skill="style-guide" path="references/tone.md">' in sent[-1].system_text
        )
    else:
        assert tone in last_result(sent[-1])
    # Progressive disclosure: the formatting rules were never needed, so never sent.
    assert all("Sentence case" not in dumps(request) for request in sent)
    await sync_to_async(assert_hidden_from_transcript)(conversation, "style-guide")


# -- script execution ----------------------------------------------------------------------


async def test_text_stats_runs_its_script_and_leaves_a_report(
    fake, model, conversation, workspace, alice
):
    (workspace.work_dir / "notes.txt").write_text("one two three\nfour five\n")

    def run_script(request):
        body = model.body(request, "text-stats") or ""
        command = re.search(r"```bash\n(.+?)\n```", body, re.S).group(1).strip()
        # Unsubstituted (tool-result): the model fills in the file itself.
        command = model.resolve(command, "text-stats").replace("$ARGUMENTS", "work/notes.txt")
        return model.shell("text-stats", command, outputs=("out/*.json",))

    def report(request):
        return Reply.text("Done: " + model.output(request).splitlines()[0])

    follow(fake, [lambda r: model.load("text-stats", "work/notes.txt"), run_script, report])
    # answer="deny" where allowed-tools must pre-approve the command, so success proves it did.
    # The tool-result design gives no skill folder to the body, so the model runs the script by
    # the relative path, which the skill's rule (the absolute path) does not cover: asked.
    answer = "allow_once" if model.profile == TOOL_RESULT else "deny"
    run = await run_turn(conversation, "Count the words in work/notes.txt", alice, answer=answer)

    assert run.status == Run.DONE
    asked = [a.tool async for a in Approval.objects.filter(conversation=conversation)]
    assert asked == (["Bash"] if model.profile == TOOL_RESULT else [])
    artifacts = workspace.artifacts()
    assert len(artifacts) == 1 and artifacts[0].startswith("out/text-stats-")
    figures = json.loads((workspace.root / artifacts[0]).read_text())["total"]
    assert figures == {"lines": 2, "words": 5, "characters": 24}
    assert await sync_to_async(final_text)(conversation) == (
        "Done: 2 lines, 5 words, 24 characters"
    )
    sent = accepted(fake)
    if model.profile == SYSTEM:
        collected = json.loads(last_result(sent[-1]))["output_files"]
        assert [f["name"] for f in collected] == artifacts
        assert json.loads(collected[0]["content"])["total"] == figures
    assert_delivered_once(model, sent, "text-stats")
    await sync_to_async(assert_hidden_from_transcript)(conversation, "text-stats")


# -- a library the model imports -----------------------------------------------------------

SALES = 'region,product,amount\nNorth,Widget,"1,200.50"\nSouth,Widget,300\nNorth,Gadget,99.50\nEast,Gadget,n/a\n'
SCRIPT_BODY = """\
rows = tablekit.load_csv("work/sales.csv")
summary = tablekit.summarise(rows)
by_region = tablekit.group_totals(rows, "region", "amount")
print(tablekit.to_markdown(summary))
print("by region:", by_region)
print("saved:", tablekit.save_json({"summary": summary, "by_region": by_region}, "out/sales.json"))
"""


async def test_table_kit_scripts_import_the_bundled_library(
    fake, model, conversation, workspace, alice
):
    (workspace.work_dir / "sales.csv").write_text(SALES)

    def write_script(request):
        body = model.body(request, "table-kit") or ""
        folder = re.search(r"put\s+`(.+?)`\s+\(the library's folder\)", body).group(1)
        header = f'import sys\nsys.path.insert(0, "{folder}")\nimport tablekit\n'
        script = model.resolve(header, "table-kit") + SCRIPT_BODY
        return Reply.tool_use("Write", {"file_path": "work/sales_summary.py", "content": script})

    def answer(request):
        printed = model.output(request)
        amount = next(line for line in printed.splitlines() if line.startswith("| amount"))
        return Reply.text(f"{amount}\nSaved to out/sales.json.")

    follow(
        fake,
        [
            lambda r: model.load("table-kit", "work/sales.csv"),
            write_script,
            lambda r: model.shell("table-kit", "python3 work/sales_summary.py", ("out/*.json",)),
            answer,
        ],
    )
    run = await run_turn(conversation, "Profile work/sales.csv", alice, answer="allow_once")

    assert run.status == Run.DONE
    script = (workspace.work_dir / "sales_summary.py").read_text()
    staged_core = workspace.skills_dir / "table-kit" / "core"
    expected_core = "skills/table-kit/core" if model.profile == TOOL_RESULT else staged_core
    assert f'sys.path.insert(0, "{expected_core}")' in script
    assert not (staged_core / "__pycache__").exists()  # importing left the staged copy as it was
    saved = json.loads((workspace.out_dir / "sales.json").read_text())
    amount = saved["summary"]["amount"]
    assert (amount["kind"], amount["count"], amount["blank"]) == ("number", 3, 1)
    assert (amount["total"], amount["min"], amount["max"]) == (1600, 99.5, 1200.5)
    assert saved["by_region"] == {"North": 1300, "South": 300}
    assert await sync_to_async(final_text)(conversation) == (
        "| amount | number | 3 | 1 | min 99.5, max 1,200.5, mean 533.33, total 1,600 |\n"
        "Saved to out/sales.json."
    )
    # Writing the script was asked about; running it was pre-approved by allowed-tools.
    asked = [a.tool async for a in Approval.objects.filter(conversation=conversation)]
    assert asked == ["Write"]
    assert_delivered_once(model, accepted(fake), "table-kit")
    await sync_to_async(assert_hidden_from_transcript)(conversation, "table-kit")


def test_tablekit_reads_other_delimiters_and_counts_decorated_numbers(tmp_path):
    path = Path(django_settings.BUNDLED_SKILLS_DIR) / "table-kit" / "core" / "tablekit.py"
    spec = importlib.util.spec_from_file_location("tablekit", path)
    tablekit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tablekit)
    data = tmp_path / "costs.csv"
    data.write_text("team;cost;owner\nops;$1,000;ana\ndev;(200);\nops;12%;ana\ndev;-;bo\n")
    rows = tablekit.load_csv(data)
    assert rows[1] == {"team": "dev", "cost": "(200)", "owner": ""}
    summary = tablekit.summarise(rows)
    assert summary["cost"] == {
        "count": 3,
        "blank": 1,
        "kind": "number",
        "min": -200,
        "max": 1000,
        "mean": 270.666667,
        "total": 812,
    }
    assert summary["owner"]["top"] == [["ana", 2], ["bo", 1]]
    assert tablekit.group_totals(rows, "team", "cost") == {"ops": 1012, "dev": -200}
    assert tablekit.to_number("1e3") == 1000 and tablekit.to_number("12 apples") is None


# -- orchestration with a forked sub-task ---------------------------------------------------

CHANGES = (
    "Add CSV export for reports\nRename the EXPORT_LIMIT setting to EXPORT_MAX_ROWS\n"
    "Fix crash when an upload is empty\nRefactor the export module\n"
)


def scout_steps() -> list[Step]:
    """The forked change-scout subagent: one Grep, then the report its skill asks for."""

    def search(request):
        prompt = request["messages"][0]["content"][0]["text"] + "\n" + request.system_text
        named = re.search(r"release risks: (.*)", prompt).group(1).strip()
        if named.startswith("$"):  # the placeholder as written: no folder was named
            named = ""
        return Reply.tool_use(
            "Grep",
            {
                "pattern": "BREAKING|TODO",
                "path": named or "work",
                "ignore_case": True,
                "output_mode": "content",
            },
        )

    def report(request):
        findings = []
        for line in last_result(request).splitlines():
            match = re.match(r"(?P<path>[^:]+):(?P<line>\d+):(?P<text>.*)", line)
            if match and "work/" in match["path"]:
                signal = "breaking" if "BREAKING" in match["text"] else "unfinished"
                note = match["text"].split("#", 1)[-1].strip()
                findings.append(f"- [{signal}] {match['path']}:{match['line']} - {note}")
        return Reply.text("\n".join([f"Findings: {len(findings)}", *sorted(findings)]))

    return [search, report]


async def test_release_prep_delegates_to_a_forked_scout_and_writes_a_brief(
    fake, model, conversation, workspace, alice
):
    (workspace.work_dir / "changes.txt").write_text(CHANGES)
    (workspace.work_dir / "src").mkdir()
    (workspace.work_dir / "src" / "settings.py").write_text(
        "EXPORT_MAX_ROWS = 10_000  # BREAKING: renamed from EXPORT_LIMIT\n"
    )
    (workspace.work_dir / "src" / "export.py").write_text(
        "def export(rows):\n    # TODO: stream large exports before 2.0\n    return rows\n"
    )

    def gather(request):
        body = model.body(request, "release-prep") or ""
        if "change-scout" not in body:
            return Reply.text("I did not get the release-prep instructions.")
        return Reply.tool_use("Read", {"file_path": "work/changes.txt"})

    def delegate(request):
        assert "Rename the EXPORT_LIMIT" in last_result(request)
        return model.load("change-scout", "work/src")

    def write_brief(request):
        risks = [line for line in last_result(request).splitlines() if line.startswith("- [")]
        brief = "\n".join(
            [
                "# Release 2.0 (4 March 2025)",
                "",
                "## Changes",
                "### Breaking changes",
                "- The EXPORT_LIMIT setting is now called EXPORT_MAX_ROWS.",
                "### New",
                "- You can export reports as CSV files.",
                "### Fixed",
                "- Uploading an empty file no longer crashes.",
                "Internal: refactored the export module.",
                "",
                "## Risks",
                *risks,
            ]
        )
        return Reply.tool_use("Write", {"file_path": "out/release-prep-2.0.md", "content": brief})

    follow(
        fake,
        [
            lambda r: model.load("release-prep", "2.0 work/changes.txt work/src"),
            gather,
            delegate,
            write_brief,
            lambda r: Reply.text("Wrote out/release-prep-2.0.md; the scout found 2 risks."),
        ],
        child_steps=scout_steps(),
    )
    # answer="deny": any approval would fail, so the brief's write was pre-approved by the skill.
    run = await run_turn(conversation, "Get 2.0 ready to ship", alice, answer="deny")

    assert run.status == Run.DONE
    assert not await Approval.objects.filter(conversation=conversation).aexists()
    child = await Run.objects.aget(parent=run)
    assert child.status == Run.DONE and child.model_calls == 2
    scout_report = (
        "Findings: 2\n"
        "- [breaking] work/src/settings.py:1 - BREAKING: renamed from EXPORT_LIMIT\n"
        "- [unfinished] work/src/export.py:2 - TODO: stream large exports before 2.0"
    )
    sent = accepted(fake)
    parent = [r for r in sent if PHRASES["change-scout"] not in first_prompt(r)]
    children = [r for r in sent if r not in parent]
    assert len(parent) == 5 and len(children) == 2
    # The subagent's final text, and only that, came back to the parent as the tool result.
    assert last_result(parent[3]) == scout_report
    assert all(PHRASES["change-scout"] not in dumps(r) for r in parent)
    assert all("work/src/settings.py:1" not in dumps(r) for r in parent[:3])
    # Skill and skill_load pass arguments; load_skill has none and returns the body as written.
    scout_prompt = children[0]["messages"][0]["content"][0]["text"] + children[0].system_text
    expected = "$ARGUMENTS" if model.profile == TOOL_RESULT else "work/src"
    assert f"release risks: {expected}\n" in scout_prompt
    # The subagent keeps the conversation's profile: its own skill tools, skill_run included.
    child_tools = {t["name"] for t in children[0]["tools"]}
    profile_tool = {META: "Skill", TOOL_RESULT: "load_skill", SYSTEM: "skill_run"}[model.profile]
    assert profile_tool in child_tools
    brief = (workspace.out_dir / "release-prep-2.0.md").read_text()
    assert "## Risks\n" + scout_report.split("\n", 1)[1] in brief
    assert await sync_to_async(final_text)(conversation) == (
        "Wrote out/release-prep-2.0.md; the scout found 2 risks."
    )
    assert_delivered_once(model, parent, "release-prep")
    await sync_to_async(assert_hidden_from_transcript)(conversation, "release-prep", "change-scout")
    assert await invocations(conversation) == {"release-prep": "allowed", "change-scout": "allowed"}
