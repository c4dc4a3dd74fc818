"""The `system-prompt` profile is the skill-toolset design (seed 004): skill_run in the staged
skill, its environment, inputs and outputs, state that lasts for the turn, the dynamic tool set."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from skills_app.core.profiles.run_files import workspace_files
from skills_app.core.tools.workspace import Workspace
from skills_app.models import Conversation, PermissionRule
from skills_app.workspaces import workspace_for
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)

SKILLS = {
    "kit": """\
        ---
        name: kit
        description: A kit with a script and a library.
        ---
        KIT-BODY for $ARGUMENTS. Run `python3 scripts/hello.py`.
        """,
    "finder": """\
        ---
        name: finder
        description: Searches with its own tool.
        ---
        FINDER-BODY

        Tools:
        - Grep
        # - Glob (not yet)
        """,
}


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    root = write_skills(tmp_path / "skills", SKILLS)
    (root / "kit" / "scripts").mkdir()
    (root / "kit" / "scripts" / "hello.py").write_text("print('hello kit')\n")
    (root / "kit" / "core").mkdir()
    (root / "kit" / "core" / "greet.py").write_text("def greet(n):\n    return f'hello {n}'\n")
    (root / "kit" / "guide.md").write_text("KIT-GUIDE\n")
    settings.SKILLS_DIRS = [root]
    settings.BUNDLED_SKILLS_DIR = tmp_path / "no-bundled"
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    PermissionRule.objects.create(behavior="allow", rule_text="Bash")
    fake_anthropic.root = root
    return fake_anthropic


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, profile="system-prompt")


def result_of(request, index=0):
    return request["messages"][-1]["content"][index]


def ran(request) -> dict:
    return json.loads(result_of(request)["content"])


def run_call(command: str, **extra) -> Reply:
    return Reply.tool_use("skill_run", {"skill": "kit", "command": command, **extra})


async def test_skill_run_starts_in_the_staged_skill_so_scripts_and_libraries_resolve(
    fake, conversation, alice
):
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "kit", "args": "Ada"}),
        run_call("python3 scripts/hello.py && pwd"),
        run_call("python3 -c 'from core.greet import greet; print(greet(1))'"),
        run_call("pwd", cwd="scripts"),
        Reply.text("ok"),
    )
    await run_turn(conversation, "go", alice)
    sent = accepted(fake)
    staged = (await sync_to_async(workspace_for)(conversation.pk)).skills_dir / "kit"
    assert "KIT-BODY for Ada." in sent[1].system_text  # skill_load passes arguments
    first = ran(sent[2])
    assert first["stdout"] == f"hello kit\n{staged}" and first["exit_code"] == 0
    assert isinstance(first["duration_ms"], int) and first["timed_out"] is False
    # Code the model writes imports the skill's library: the skill root is the cwd.
    assert ran(sent[3])["stdout"] == "hello 1"
    assert ran(sent[4])["stdout"] == f"{staged}/scripts"


async def test_skill_run_sets_the_designs_environment_and_a_fresh_run_folder(
    fake, conversation, alice
):
    show = 'for v in WORKSPACE_DIR SKILLS_DIR WORK_DIR OUTPUT_DIR RUN_DIR SKILL_NAME; do echo "$v=${!v}"; done; ls -A "$RUN_DIR"'
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "kit"}),
        run_call(show),
        run_call(show, env={"RUN_DIR": "/tmp/elsewhere"}),
        run_call('touch "$RUN_DIR/mine"; echo "$RUN_DIR"'),
        Reply.text("ok"),
    )
    await run_turn(conversation, "go", alice)
    sent = accepted(fake)
    ws = await sync_to_async(workspace_for)(conversation.pk)
    lines = dict(line.split("=", 1) for line in ran(sent[2])["stdout"].splitlines())
    assert lines["WORKSPACE_DIR"] == str(ws.root)
    assert lines["SKILLS_DIR"] == str(ws.skills_dir)
    assert lines["WORK_DIR"] == str(ws.work_dir)
    assert lines["OUTPUT_DIR"] == str(ws.out_dir)
    assert lines["SKILL_NAME"] == "kit"
    run_dir = Path(lines["RUN_DIR"])
    assert run_dir.parent == ws.root / "runs" and run_dir.is_dir()
    # The model may not move RUN_DIR; each call gets a new, empty one.
    refused = result_of(sent[3])
    assert refused["is_error"] and "RUN_DIR is set by the server" in refused["content"]
    other = Path(ran(sent[4])["stdout"].strip())
    assert other != run_dir and other.parent == run_dir.parent and (other / "mine").is_file()


async def test_out_and_work_in_the_skill_lead_to_the_workspace_and_globs_collect_files(
    fake, conversation, alice
):
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "kit"}),
        run_call(
            "echo one > out/a.txt && echo two > out/b.txt && echo 3 > out/c.json "
            "&& echo scratch > work/s.txt",
            output_files=["$OUTPUT_DIR/*.txt", "${WORK_DIR}/s.txt", "skills/kit/SKILL.md"],
        ),
        run_call("true", output_files=["work/s.txt"], save_as_artifacts=True),
        Reply.text("ok"),
    )
    await run_turn(conversation, "go", alice)
    sent = accepted(fake)
    ws = await sync_to_async(workspace_for)(conversation.pk)
    assert (ws.out_dir / "a.txt").read_text() == "one\n"
    collected = ran(sent[2])["output_files"]
    # Staged skill files never come back this way (they are hidden content).
    assert [(f["name"], f["content"]) for f in collected] == [
        ("out/a.txt", "one\n"),
        ("out/b.txt", "two\n"),
        ("work/s.txt", "scratch\n"),
    ]
    saved = ran(sent[3])
    assert saved["artifact_files"] == ["out/s.txt"]
    assert (ws.out_dir / "s.txt").read_text() == "scratch\n"


async def test_inputs_are_copied_in_and_host_paths_are_refused(fake, conversation, alice):
    ws = await sync_to_async(workspace_for)(conversation.pk)
    (ws.out_dir / "report.csv").write_text("a,b\n")
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "kit"}),
        run_call(
            "cat ../../work/inputs/report.csv work/inputs/guide.md",
            inputs=[{"src": "artifact://report.csv"}, {"src": "skill://kit/guide.md"}],
        ),
        run_call("true", inputs=[{"src": "host:///etc/passwd"}]),
        run_call("true", inputs=[{"src": "workspace://out/report.csv", "dst": "skills/kit/x"}]),
        Reply.text("ok"),
    )
    await run_turn(conversation, "go", alice)
    sent = accepted(fake)
    assert ran(sent[2])["stdout"] == "a,b\nKIT-GUIDE"
    host = result_of(sent[3])
    assert host["is_error"] and "host:// inputs are not available" in host["content"]
    into_skill = result_of(sent[4])
    assert into_skill["is_error"] and "read-only" in into_skill["content"]


async def test_a_changed_skill_is_staged_again_before_the_next_run(fake, conversation, alice):
    script = fake.root / "kit" / "scripts" / "hello.py"
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "kit"}),
        run_call("python3 scripts/hello.py"),
    )
    steps = iter(
        [
            # The skill changes on disk between two runs (a new upload, an edit).
            lambda: (script.write_text("print('edited')\n"), run_call("python3 scripts/hello.py"))[
                1
            ],
            lambda: Reply.text("ok"),
        ]
    )
    fake.set_responder(lambda request: next(steps)())
    await run_turn(conversation, "go", alice)
    sent = accepted(fake)
    assert ran(sent[2])["stdout"] == "hello kit"
    assert ran(sent[3])["stdout"] == "edited"


async def test_loaded_state_lasts_for_the_turn_that_loaded_it(fake, conversation, alice):
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "kit"}),
        Reply.tool_use("skill_select_docs", {"skill": "kit", "docs": ["guide.md"]}),
        Reply.text("loaded"),
    )
    await run_turn(conversation, "load kit", alice)
    # Choosing documents needs the skill loaded in this turn (skill_run does not: seed 004).
    select = Reply.tool_use("skill_select_docs", {"skill": "kit", "docs": ["guide.md"]})
    fake.enqueue(select, Reply.text("ok"))
    await run_turn(conversation, "read the guide", alice)
    sent = accepted(fake)
    assert "KIT-BODY" in sent[2].system_text and "KIT-GUIDE" in sent[2].system_text
    assert "KIT-BODY" not in sent[3].system_text and "KIT-GUIDE" not in sent[3].system_text
    assert "stay until the user's next message" in sent[3].system_text
    refused = result_of(sent[4])
    assert refused["is_error"] and "skill_load" in refused["content"]


async def test_a_setting_keeps_the_state_for_the_conversation(fake, conversation, alice, settings):
    settings.SKILL_STATE_LIFETIME = "conversation"
    fake.enqueue(Reply.tool_use("skill_load", {"skill": "kit"}), Reply.text("loaded"))
    await run_turn(conversation, "load kit", alice)
    fake.enqueue(run_call("echo still"), Reply.text("ok"))
    await run_turn(conversation, "run it", alice)
    sent = accepted(fake)
    assert "KIT-BODY" in sent[2].system_text
    assert "stay for the rest of the conversation" in sent[2].system_text
    assert ran(sent[3])["stdout"] == "still"


async def test_a_skills_tools_list_is_the_dynamic_tool_set_of_its_turn(fake, conversation, alice):
    fake.enqueue(
        Reply.tool_use("Grep", {"pattern": "x"}),
        Reply.tool_use("skill_load", {"skill": "finder"}),
        Reply.tool_use("skill_list_tools", {"skill": "finder"}),
        Reply.tool_use("skill_select_tools", {"skill": "finder", "tools": []}),
        Reply.tool_use("skill_select_tools", {"skill": "finder", "tools": ["Glob"]}),
        Reply.tool_use("skill_select_tools", {"skill": "finder", "tools": "*"}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "find", alice)
    fake.enqueue(Reply.text("next turn"))
    await run_turn(conversation, "again", alice)
    sent = accepted(fake)
    offered = [{t["name"] for t in r["tools"]} for r in sent]
    assert "Grep" not in offered[0] and "Glob" in offered[0]
    assert "Error: unknown tool" in result_of(sent[1])["content"]
    assert "Grep" in offered[2]  # selected on load
    assert result_of(sent[3])["content"] == "- Grep (selected)"
    assert "Grep" not in offered[4]  # an empty selection
    assert "not a tool of the skill" in result_of(sent[5])["content"]
    assert "Grep" in offered[6]
    assert "Grep" not in offered[7]  # the next turn starts without it


async def test_a_forked_skill_keeps_the_profile_and_its_state_stays_in_the_subagent(
    fake, conversation, alice, settings
):
    settings.SKILL_STATE_LIFETIME = "conversation"  # the longest a parent could keep state
    root = fake.root
    (root / "scout").mkdir()
    (root / "scout" / "SKILL.md").write_text(
        "---\ndescription: Scouts.\ncontext: fork\n---\nSCOUT-BODY: look at $ARGUMENTS\n"
    )

    def respond(request):
        if "SCOUT-BODY" in request.system_text:  # the subagent: the skill is in its system
            if request["messages"][-1]["content"][0].get("type") == "tool_result":
                return Reply.text("scouted")
            return Reply.tool_use("skill_run", {"skill": "scout", "command": "echo from-fork"})
        turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
        if turn == 0:
            return Reply.tool_use("skill_load", {"skill": "scout", "args": "work/"})
        return Reply.text("done")

    fake.set_responder(respond)
    await run_turn(conversation, "scout it", alice)
    await run_turn(conversation, "and now?", alice)
    sent = accepted(fake)
    child = [r for r in sent if "SCOUT-BODY" in r.system_text]
    parent = [r for r in sent if r not in child]
    assert "SCOUT-BODY: look at work/" in child[0].system_text
    assert "from-fork" in child[1]["messages"][-1]["content"][0]["content"]
    assert result_of(parent[1])["content"] == "scouted"
    assert len(parent) == 3 and all("SCOUT-BODY" not in str(r) for r in parent)


async def test_the_toolset_has_six_skill_tools_and_skill_run(fake, conversation, alice):
    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "hi", alice)
    names = [t["name"] for t in accepted(fake)[0]["tools"]]
    assert names[-7:] == [
        "skill_list",
        "skill_load",
        "skill_list_docs",
        "skill_select_docs",
        "skill_list_tools",
        "skill_select_tools",
        "skill_run",
    ]
    run = next(t for t in accepted(fake)[0]["tools"] if t["name"] == "skill_run")
    assert run["description"] == (
        "Run a command inside a skill workspace. "
        "Stages the entire skill directory and runs a single command."
    )
    assert {"inputs", "save_as_artifacts", "output_files", "cwd"} <= set(
        run["input_schema"]["properties"]
    )


# -- attacks on what was built ------------------------------------------------------------


async def test_links_a_command_plants_are_never_followed_by_the_server(
    fake, conversation, alice, tmp_path
):
    secret = tmp_path / "secret.txt"
    secret.write_text("SERVER-SECRET\n")
    plant = textwrap.dedent(
        f"""\
        ln -s {secret} ../../work/leak.txt
        ln -s {tmp_path} ../../work/outside
        rm -rf ../../runs && ln -s {tmp_path} ../../runs
        mkdir -p ../../work/inputs && ln -s {secret} ../../work/inputs/copy.txt
        """
    )
    fake.enqueue(
        Reply.tool_use("skill_load", {"skill": "kit"}),
        run_call(plant, output_files=["work/*", "work/**/*.txt", "/etc/passwd", "../*"]),
        run_call(
            "true",
            inputs=[{"src": "skill://kit/guide.md", "dst": "work/inputs/copy.txt"}],
        ),
        run_call("true", inputs=[{"src": "workspace://work/leak.txt"}]),
        run_call("true", cwd="../../.."),
        Reply.text("ok"),
    )
    await run_turn(conversation, "go", alice)
    sent = accepted(fake)
    assert "SERVER-SECRET" not in json.dumps([r["messages"] for r in sent])
    assert ran(sent[2])["output_files"] == []
    # Writing an input through a planted link is refused, and the target is untouched.
    assert result_of(sent[3])["is_error"] and secret.read_text() == "SERVER-SECRET\n"
    assert result_of(sent[4])["is_error"]
    assert (
        result_of(sent[5])["is_error"] and "outside the workspace" in result_of(sent[5])["content"]
    )
    ws = await sync_to_async(workspace_for)(conversation.pk)
    assert not os.path.islink(ws.root / "runs")  # a planted runs/ link was replaced
    assert not any(p.name.startswith("run-") for p in tmp_path.iterdir())


def test_matching_output_globs_looks_at_a_bounded_number_of_entries(tmp_path):
    ws = Workspace(tmp_path / "ws")
    for i in range(30):
        (ws.work_dir / f"f{i:02d}.txt").write_text("x")
    assert len(workspace_files(ws)) == 30
    # Past the bound the walk stops instead of stalling the server on a huge tree.
    assert len(workspace_files(ws, limit=10)) < 30
