"""`tool-result` "as the source design" judged by learn-claude-code s05's own code (seed 001).

The oracle (`tests/support/design_oracles/s05.py`) runs the design's loader over the skills as they lie
in the conversation workspace's `skills/` (the design's `WORKDIR/skills`): every bundled skill
and a set of edge cases. The app runs the same skills through the real SDK against the fake
Anthropic server; the request it sent is compared with the oracle's, byte for byte.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from skills_app.models import Approval, Conversation, PermissionRule, SkillInvocation
from skills_app.workspaces import workspace_for
from tests.support.design_oracles import s05
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model

pytestmark = pytest.mark.django_db(transaction=True)

# Folder (under the skills root) -> SKILL.md text, written byte for byte.
EDGE_CASES = {
    "trailing": "---\nname: trailing\ndescription: Ends with blank lines.\n---\n\nTRAIL-BODY\n\n\n",
    "folded": (
        "---\nname: folded\ndescription: >\n  Folded across\n  two lines.\ntags: a, b\n---\n"
        "FOLDED-BODY\n"
    ),
    "literal": "---\nname: literal\ndescription: |\n  Kept as\n  lines.\n---\nLITERAL-BODY\n",
    "quoted": "---\nname: \"quoted\"\ndescription: 'Single: quoted'\n---\nQUOTED-BODY\n",
    "bare": "---\nname: bare\n---\nBARE-BODY without a description\n",
    "no-frontmatter": "NO-FRONTMATTER-BODY: the whole file is the body.\n",
    "crlf": "---\r\nname: crlf\r\ndescription: Windows line ends.\r\n---\r\n\r\nCRLF-BODY\r\n",
    "bom": "\ufeff---\nname: bom\ndescription: Starts with a byte-order mark.\n---\nBOM-BODY\n",
    "nested-tags": (
        "---\nname: nested-tags\ndescription: Tags under metadata.\nmetadata:\n  tags: x, y\n---\n"
        "NESTED-TAGS-BODY\n"
    ),
    "zone/inner": "---\ndescription: A skill two folders down.\n---\nINNER-BODY\n",
    "toolbox/skills/pdf": "---\ndescription: A plugin's skill.\n---\nPDF-BODY\n",
    "dup-a": "---\nname: shared-name\ndescription: First of two.\n---\nDUP-A-BODY\n",
    "dup-b": "---\nname: shared-name\ndescription: Second of two.\n---\nDUP-B-BODY\n",
    "empty-body": "---\nname: empty-body\ndescription: Nothing below.\n---\n",
}
# Where Skillscope stages a skill in the workspace's skills/: under its command name, flat.
STAGED = {"zone/inner": "inner", "toolbox/skills/pdf": "toolbox__pdf"}
# A skill its author keeps from the model: left out in every mode (docs/profiles.md).
MODEL_DISABLED = {"commit-message"}


def write_edge_cases(root: Path) -> Path:
    for folder, text in EDGE_CASES.items():
        (root / folder).mkdir(parents=True)
        (root / folder / "SKILL.md").write_bytes(text.encode("utf-8"))
    return root


def staged_layout(target: Path, bundled: Path, edge: Path) -> Path:
    """The design's WORKDIR/skills: every offered skill's folder, as Skillscope stages it."""
    skills = target / "skills"
    for folder in sorted(p.name for p in bundled.iterdir() if (p / "SKILL.md").is_file()):
        if folder not in MODEL_DISABLED:
            shutil.copytree(bundled / folder, skills / folder)
    for folder in EDGE_CASES:
        shutil.copytree(edge / folder, skills / STAGED.get(folder, folder))
    return skills


@pytest.fixture
def fake(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = [write_edge_cases(tmp_path / "edge")]
    settings.AGENT_MAX_TURNS = 60
    return fake_anthropic


@pytest.fixture
def loader(tmp_path) -> s05.SkillLoader:
    bundled = Path(django_settings.BUNDLED_SKILLS_DIR)
    return s05.SkillLoader(staged_layout(tmp_path / "oracle", bundled, tmp_path / "edge"))


async def design_conversation(alice: Any) -> Conversation:
    return await Conversation.objects.acreate(
        owner=alice, profile="tool-result", base_prompt="design"
    )


def last_result(request: dict[str, Any]) -> dict[str, Any]:
    block: dict[str, Any] = request["messages"][-1]["content"][0]
    assert block["type"] == "tool_result"
    return block


async def test_the_request_is_the_designs_system_tools_and_options(fake, loader, alice):
    conversation = await design_conversation(alice)
    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "hi", alice)
    (request,) = accepted(fake)
    root = (await sync_to_async(workspace_for)(conversation.pk)).root
    assert request["system"] == s05.system(root, loader)  # a string: no cached blocks
    assert request["tools"] == s05.TOOLS
    assert request["max_tokens"] == s05.MAX_TOKENS
    assert "thinking" not in request and "output_config" not in request
    assert "cache_control" not in json.dumps(request)
    # Positive control: the catalog holds every edge case the way the naive reader sees it.
    assert "  - \"quoted\": 'Single: quoted'" in request["system"]
    assert "  - folded: > [a, b]" in request["system"]
    assert "  - nested-tags: Tags under metadata. [x, y]" in request["system"]
    assert "  - commit-message:" not in request["system"]


async def test_load_skill_returns_what_the_designs_get_content_returns(fake, loader, alice):
    conversation = await design_conversation(alice)
    names = [*loader.skills, "no-such-skill"]
    fake.enqueue(*(Reply.tool_use("load_skill", {"name": n}) for n in names), Reply.text("ok"))
    # "deny": an approval would refuse the load, so every success proves none was asked.
    run = await run_turn(conversation, "load them all", alice, answer="deny")
    assert run.status == "done", run.error
    sent = accepted(fake)
    assert len(sent) == len(names) + 1
    for name, request in zip(names, sent[1:], strict=True):
        result = last_result(request)
        assert result["content"] == loader.get_content(name), name
        assert "is_error" not in result
    # The body as the design's loader leaves it: the blank line after the frontmatter, the
    # file's last newline, CRLF read as LF, a byte-order mark that hides the frontmatter.
    by_name = dict(zip(names, sent[1:], strict=True))
    assert last_result(by_name["release-notes"])["content"].startswith(
        '<skill name="release-notes">\n\n# Writing release notes\n'
    )
    assert last_result(by_name["trailing"])["content"].endswith("TRAIL-BODY\n\n\n\n</skill>")
    assert last_result(by_name["crlf"])["content"] == '<skill name="crlf">\n\nCRLF-BODY\n\n</skill>'
    assert last_result(by_name["bom"])["content"].startswith('<skill name="bom">\n\ufeff---\n')
    assert last_result(by_name["shared-name"])["content"] == (
        '<skill name="shared-name">\nDUP-B-BODY\n\n</skill>'
    )
    assert not await Approval.objects.filter(conversation=conversation).aexists()
    audited = SkillInvocation.objects.filter(conversation=conversation, decision="allowed")
    assert await audited.acount() == len(names) - 1


async def test_nested_folders_are_read_where_skillscope_stages_them(fake, loader, alice, tmp_path):
    """The deliberate difference for nested folders: the design's loader over the source tree
    would name and order them by their source folders; Skillscope's workspace has them flat."""
    conversation = await design_conversation(alice)
    fake.enqueue(Reply.text("ok"))
    await run_turn(conversation, "hi", alice)
    system = accepted(fake)[0]["system"]
    assert "  - inner: A skill two folders down." in system
    assert "  - toolbox__pdf: A plugin's skill. (plugin" not in system
    assert "  - toolbox__pdf: A plugin's skill." in system
    source_tree = s05.SkillLoader(tmp_path / "edge").get_descriptions()
    assert "  - pdf: A plugin's skill." in source_tree  # the parent folder's name
    assert source_tree.index("  - inner:") > source_tree.index("  - trailing:")  # zone/ is last
    assert system.index("  - inner:") < system.index("  - literal:")


async def test_a_slash_command_reaches_the_model_as_typed(fake, alice):
    conversation = await design_conversation(alice)
    fake.enqueue(Reply.tool_use("load_skill", {"name": "release-notes"}), Reply.text("ok"))
    await run_turn(conversation, "/release-notes 2.1", alice)
    first, second = accepted(fake)
    assert first["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "/release-notes 2.1"}]}
    ]
    assert "Writing release notes" not in json.dumps(first)
    # The model loads it itself, as seed 001's figure 2 has it ("triggers the Skill tool").
    assert last_result(second)["content"].startswith('<skill name="release-notes">\n\n# Writing')


async def test_skillscope_additions_are_left_out(fake, alice, tmp_path, settings):
    """A skill's model and allowed-tools, Claude Code's, do not apply in s05's design."""
    root = tmp_path / "extra"
    (root / "switcher").mkdir(parents=True)
    (root / "switcher" / "SKILL.md").write_text(
        "---\nname: switcher\ndescription: Switches.\nmodel: claude-haiku-4-5\n"
        "allowed-tools: Bash(echo *)\ncontext: fork\n---\nSWITCHER-BODY\n"
    )
    settings.SKILLS_DIRS = [*settings.SKILLS_DIRS, root]
    conversation = await design_conversation(alice)
    fake.enqueue(
        Reply.tool_use("load_skill", {"name": "switcher"}),
        Reply.tool_use("bash", {"command": "echo hi"}),
        Reply.text("ok"),
    )
    await run_turn(conversation, "switch", alice, answer="deny")
    sent = accepted(fake)
    # Not forked: the body is the tool result; the model stays the conversation's.
    assert last_result(sent[1])["content"] == '<skill name="switcher">\nSWITCHER-BODY\n\n</skill>'
    assert {r["model"] for r in sent} == {sent[0]["model"]}
    # allowed-tools did not pre-approve `echo`: the default asked, and "deny" refused it.
    assert last_result(sent[2])["content"].startswith("Permission denied")
    invocation = await SkillInvocation.objects.aget(conversation=conversation)
    assert invocation.allowed_tools == [] and invocation.model_override == ""


async def test_the_designs_tools_answer_as_its_handlers_do(fake, alice, tmp_path):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Bash")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Edit")
    conversation = await design_conversation(alice)
    ws = await sync_to_async(workspace_for)(conversation.pk)
    (ws.work_dir / "lines.txt").write_bytes(b"one\r\ntwo\nthree\nfour\n")
    (ws.work_dir / "edit.txt").write_text("alpha beta alpha\n")
    calls: list[tuple[str, dict[str, Any]]] = [
        ("bash", {"command": "printf 'out\\n'; printf 'err\\n' >&2"}),
        ("bash", {"command": "true"}),
        ("bash", {"command": "sudo ls"}),
        ("read_file", {"path": "work/lines.txt", "limit": 2}),
        ("read_file", {"path": "work/lines.txt"}),
        ("read_file", {"path": "../outside.txt"}),
        ("read_file", {"path": "work/missing.txt"}),
        ("write_file", {"path": "out/note.txt", "content": "héllo\n"}),
        ("edit_file", {"path": "work/edit.txt", "old_text": "alpha", "new_text": "omega"}),
        ("edit_file", {"path": "work/edit.txt", "old_text": "gamma", "new_text": "x"}),
    ]
    fake.enqueue(*(Reply.tool_use(n, i) for n, i in calls), Reply.text("ok"))
    run = await run_turn(conversation, "use the tools", alice, answer="allow_once")
    assert run.status == "done", run.error
    results = [last_result(r) for r in accepted(fake)[1:]]
    # The oracle runs the design's handlers on a copy taken before the app's calls changed it.
    oracle = (tmp_path / "oracle-workdir").resolve()
    oracle.mkdir()
    (oracle / "work").mkdir()
    (oracle / "work" / "lines.txt").write_bytes(b"one\r\ntwo\nthree\nfour\n")
    (oracle / "work" / "edit.txt").write_text("alpha beta alpha\n")
    expected = [
        s05.run_bash(oracle, calls[0][1]["command"]),
        s05.run_bash(oracle, "true"),
        s05.run_bash(oracle, "sudo ls"),
        s05.run_read(oracle, "work/lines.txt", 2),
        s05.run_read(oracle, "work/lines.txt"),
        None,  # a path outside: the rules refuse it first (below)
        s05.run_read(oracle, "work/missing.txt").replace(str(oracle), str(ws.root)),
        s05.run_write(oracle, "out/note.txt", "héllo\n"),
        s05.run_edit(oracle, "work/edit.txt", "alpha", "omega"),
        s05.run_edit(oracle, "work/edit.txt", "gamma", "x"),
    ]
    contents = [r["content"] for r in results]
    assert [c for c, e in zip(contents, expected, strict=True) if e is not None] == [
        e for e in expected if e is not None
    ]
    assert expected[0] == "out\nerr" and expected[2] == "Error: Dangerous command blocked"
    assert not any("is_error" in r for i, r in enumerate(results) if i != 5)
    # The deliberate difference: Skillscope's rules refuse a path outside the workspace before
    # any tool runs (an error result), where the design's safe_path answers in text.
    assert s05.run_read(oracle, "../outside.txt") == "Error: Path escapes workspace: ../outside.txt"
    assert contents[5].startswith("Permission denied: default for Read: ")
    assert results[5]["is_error"] is True
    assert (ws.out_dir / "note.txt").read_bytes() == (oracle / "out" / "note.txt").read_bytes()
    assert (ws.work_dir / "edit.txt").read_bytes() == (oracle / "work" / "edit.txt").read_bytes()
