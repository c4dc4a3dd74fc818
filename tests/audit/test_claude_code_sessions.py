"""Claude Code session files as Claude Code writes them: import, and export read by claude-code-log.

Two kinds of material:
- `tests/fixtures/claude_code/`: session files written for this project, in the shapes real
  Claude Code files have (one line per content block sharing a `message.id`, results arriving
  between those lines, interleaved sidechains, a subagent-only file, malformed lines, skill
  prompts flagged `isMeta`, `isSynthetic` or not at all);
- the test data of three public transcript viewers (claude-code-viewer, claude-code-log,
  claude-code-transcripts), read from local snapshots of their repositories when they exist and
  skipped (saying why) otherwise. They are not part of this project, so none is checked in.

The export's oracle is the `claude-code-log` package: it must read what we write without a
validation error, and the file must import back to the same visible transcript.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.urls import reverse

from skills_app.audit.transcript_io import export_lines, import_transcript
from skills_app.core.cc_transcript import parse_transcript
from skills_app.core.transcript import text_of
from skills_app.models import Conversation, PermissionRule
from skills_app.runs import agent_setup
from tests.support.fake_anthropic import Reply, validate_request
from tests.support.loop_helpers import run_turn, use_fake_model, write_skills
from tests.support.paths import FIXTURES


def export_text(conversation: Conversation, *, include_hidden: bool) -> str:
    return "".join(export_lines(conversation, include_hidden=include_hidden))


FIXTURES = FIXTURES / "claude_code"
SKILL_MARKERS = ("SKILL-BODY-META-7731", "SKILL-BODY-SYNTHETIC-4410", "SKILL-BODY-UNFLAGGED-9902")


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def api_valid(conversation: Conversation) -> str | None:
    """The API's verdict on the stored history followed by a new user message."""
    kwargs = agent_setup.build_request(conversation).as_kwargs()
    messages = [*kwargs["messages"], {"role": "user", "content": [{"type": "text", "text": "go"}]}]
    if len(messages) > 1 and messages[-2]["role"] == "user":
        messages[-2]["content"].extend(messages.pop()["content"])
    return validate_request({**kwargs, "messages": messages})


# -- the shapes, read without a database ---------------------------------------------------------


def test_lines_of_one_message_id_are_merged_with_results_that_arrived_between_them():
    parsed = parse_transcript(fixture("parallel_calls.jsonl"))
    kinds = [(m.role, m.kind) for m in parsed.messages]
    assert kinds == [
        ("user", "skill_status"),
        ("user", "skill_prompt"),
        ("assistant", "tool_use"),
        ("user", "tool_result"),
        ("user", "tool_result"),
        ("user", "tool_result"),
        ("assistant", "text"),
    ]
    calls = parsed.messages[2]
    assert [b["type"] for b in calls.content] == ["text", "tool_use", "tool_use", "tool_use"]
    assert calls.lines == (3, 4, 6, 7)
    # The repeated text block of the last answer is kept once; its line still counts as merged.
    assert parsed.messages[-1].content == [
        {"type": "text", "text": "Two notes; they are already in date order."}
    ]
    assert parsed.merged_lines == 4
    assert parsed.other_lines == {"summary": 1} and parsed.skipped == ()


def test_sidechain_lines_become_subagent_records_beside_the_thread_not_in_it():
    parsed = parse_transcript(fixture("sidechains.jsonl"))
    assert [m.kind for m in parsed.messages] == [
        "text", "tool_use", "tool_result", "tool_result", "text"
    ]  # fmt: skip
    assert all("config/a.toml" not in json.dumps(m.content) or m.role == "assistant"
               for m in parsed.messages)  # fmt: skip
    first, second = parsed.subagents
    assert (first.tool_use_id, second.tool_use_id) == ("toolu_task_1", "toolu_task_2")
    # Each is shown after the main message that carries its call's result.
    assert (first.after, second.after) == (3, 4)
    assert [m.kind for m in first.messages] == ["text", "tool_use", "tool_result", "text"]
    assert first.messages[2].content[0]["tool_use_id"] == "toolu_sub1_read"
    assert second.messages[-1].content == [{"type": "text", "text": "Keys in b.toml: port."}]


def test_a_file_of_one_subagent_is_read_as_its_conversation():
    parsed = parse_transcript(fixture("agent-f00d.jsonl"))
    assert parsed.only_subagent and parsed.subagents == ()
    assert [m.role for m in parsed.messages] == ["user", "assistant"]


def test_malformed_lines_are_skipped_each_with_its_line_and_reason():
    parsed = parse_transcript(fixture("malformed_lines.jsonl"))
    assert [(s.line, s.reason) for s in parsed.skipped] == [
        (3, "not valid JSON (Unterminated string starting at)"),
        (4, "not a JSON object"),
        (5, 'no "type" ("user" or "assistant")'),
        (6, 'content block 1 (tool_use): "input" is not an object'),
        (7, "the tool result for toolu_half answers a call on line 6, which was skipped"),
        (8, '"message.content" is neither text nor a list of blocks'),
    ]
    assert [m.line for m in parsed.messages] == [1, 2, 9, 10]


def test_skill_prompts_are_hidden_whether_flagged_is_meta_is_synthetic_or_not_at_all():
    parsed = parse_transcript(fixture("skill_prompts.jsonl"))
    prompts = [m for m in parsed.messages if any(k in json.dumps(m.content) for k in SKILL_MARKERS)]
    assert len(prompts) == 3
    assert all(m.is_meta and m.kind == "skill_prompt" for m in prompts)
    # Everything else stays visible: the user's words, the status lines, the tool results.
    visible = [m for m in parsed.messages if not m.is_meta]
    assert [m.kind for m in visible].count("skill_status") == 1
    assert "Launching skill: pdf-forms" in json.dumps([m.content for m in visible])


# -- stored, shown, sent ------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.jsonl")))
def test_every_fixture_imports_into_a_history_the_api_accepts(alice, name):
    result = import_transcript(alice.pk, fixture(name))
    assert result.messages > 0
    assert api_valid(result.conversation) is None


@pytest.mark.django_db
def test_subagent_rows_are_stored_after_their_call_and_never_sent(alice):
    result = import_transcript(alice.pk, fixture("sidechains.jsonl"))
    rows = list(result.conversation.messages.order_by("seq"))
    marks = [r.meta.get("imported_subagent") for r in rows]
    assert marks == [None, None, None, 1, 1, 1, 1, None, 2, 2, 2, 2, None]
    assert all(not r.to_model for r in rows if r.meta.get("imported_subagent"))
    sent = json.dumps(agent_setup.build_request(result.conversation).as_kwargs()["messages"])
    assert "toolu_sub1_read" not in sent and "Keys in a.toml: port, host." in sent
    assert result.subagents == 2


@pytest.mark.django_db
def test_imported_skill_prompts_reach_the_model_but_not_the_owners_page(alice, auditor):
    result = import_transcript(alice.pk, fixture("skill_prompts.jsonl"))
    owner, inspector = Client(), Client()
    owner.force_login(alice)
    inspector.force_login(auditor)
    page = owner.get(reverse("conversation", args=[result.conversation.pk])).content.decode()
    assert not any(marker in page for marker in SKILL_MARKERS)
    assert "Fill in the form in intake.pdf." in page  # the page did render the conversation
    # Positive controls: the model is sent every prompt, and an inspector sees them.
    sent = json.dumps(agent_setup.build_request(result.conversation).as_kwargs()["messages"])
    assert all(marker in sent for marker in SKILL_MARKERS)
    audit = inspector.get(reverse("audit-conversation", args=[result.conversation.pk]))
    assert all(marker in audit.content.decode() for marker in SKILL_MARKERS)
    assert result.hidden == 3


# -- public sessions (snapshots of other projects' test data) ------------------------------------

MIRROR = Path(os.environ.get("SKILLSCOPE_MIRROR") or "/work/.mirror")
PUBLIC = {
    # repository: (folder in the repository, session files expected there)
    "d-kimuson+claude-code-viewer": ("mock-global-claude-dir/projects/sample-project", 5),
    "daaain+claude-code-log": ("test/test_data", 4),
    "simonw+claude-code-transcripts": ("tests", 1),
}


def _public_sessions() -> list[tuple[str, str]]:
    found = []
    for repo, (folder, _count) in PUBLIC.items():
        git_dir = MIRROR / repo / "repo"
        if not (git_dir / "HEAD").is_file():
            continue
        listing = subprocess.run(
            ["git", f"--git-dir={git_dir}", "ls-tree", "--name-only", "HEAD", f"{folder}/"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.split()
        found += [(repo, path) for path in listing if path.endswith(".jsonl")]
    return found


PUBLIC_SESSIONS = _public_sessions()


@pytest.mark.skipif(
    not PUBLIC_SESSIONS,
    reason=f"no snapshots of the transcript viewers' repositories under {MIRROR}; set "
    "SKILLSCOPE_MIRROR to a folder with <owner>+<name>/repo git directories to run these",
)
@pytest.mark.django_db
@pytest.mark.parametrize(("repo", "path"), PUBLIC_SESSIONS or [("none", "none")])
def test_every_public_session_file_imports(alice, repo, path):
    data = subprocess.run(
        ["git", f"--git-dir={MIRROR / repo / 'repo'}", "show", f"HEAD:{path}"],
        capture_output=True,
        timeout=60,
        check=True,
    ).stdout
    result = import_transcript(alice.pk, data)
    assert result.messages > 0
    assert api_valid(result.conversation) is None
    lines = [line for line in data.splitlines() if line.strip()]
    # Every line is accounted for: stored (maybe merged), skipped with a reason, or another type.
    stored_lines = sum(
        len(r.meta.get("imported_lines", [r.meta["imported_line"]]))
        for r in result.conversation.messages.all()
        if "imported_line" in r.meta
    )
    others = sum(result.other_lines.values())
    assert stored_lines + len(result.skipped) + others + _empty_lines(data) == len(lines)


def _empty_lines(data: bytes) -> int:
    """Message lines with no content at all (stored as nothing, neither skipped nor kept)."""
    count = 0
    for raw in data.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") in ("user", "assistant"):
            message = record.get("message")
            if isinstance(message, dict) and message.get("content") in ("", []):
                count += 1
    return count


def test_the_three_full_public_sessions_are_among_them():
    if not PUBLIC_SESSIONS:
        pytest.skip("no snapshots of the transcript viewers' repositories")
    names = {Path(p).name for _r, p in PUBLIC_SESSIONS}
    assert {
        "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
        "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
        "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    } <= names
    assert len(PUBLIC_SESSIONS) == sum(count for _f, count in PUBLIC.values())


# -- the export, read by claude-code-log ---------------------------------------------------------


def read_with_claude_code_log(path: Path) -> tuple[list, str]:
    """claude-code-log's own loader on `path`: (entries, what it printed about the lines)."""
    from claude_code_log.converter import load_transcript

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        entries = load_transcript(path, silent=False)
    return entries, printed.getvalue()


def assert_read_cleanly(path: Path) -> list:
    entries, printed = read_with_claude_code_log(path)
    complaints = [
        line for line in printed.splitlines() if line.startswith("Line ") or "error" in line.lower()
    ]
    assert complaints == []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    assert len(entries) == len(lines)
    return entries


def visible_rows(conversation: Conversation) -> list[tuple]:
    return list(
        conversation.messages.filter(is_meta=False)
        .order_by("seq")
        .values_list("role", "content", "to_model", "kind")
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "name", ["parallel_calls.jsonl", "sidechains.jsonl", "skill_prompts.jsonl"]
)
def test_an_imported_session_exports_to_a_file_claude_code_log_reads_and_back(
    tmp_path, alice, bob, name
):
    first = import_transcript(alice.pk, fixture(name)).conversation
    for include_hidden in (False, True):
        out = tmp_path / f"{include_hidden}-{name}"
        out.write_text(export_text(first, include_hidden=include_hidden))
        entries = assert_read_cleanly(out)
        sidechain = [e for e in entries if getattr(e, "isSidechain", False)]
        assert len(sidechain) == first.messages.filter(meta__has_key="imported_subagent").count()
        again = import_transcript(bob.pk, out.read_bytes()).conversation
        assert visible_rows(again) == visible_rows(first)
        assert api_valid(again) is None


@pytest.mark.django_db(transaction=True)
async def test_a_run_with_skills_exports_to_a_file_claude_code_log_renders(
    settings, fake_anthropic, tmp_path, alice, bob
):
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    use_fake_model(settings, fake_anthropic)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    conversation = await Conversation.objects.acreate(owner=alice, title="to claude-code-log")
    fake_anthropic.enqueue(
        Reply.tool_use("Skill", {"skill": "greeter", "args": "Bob"}, text="Loading it."),
        Reply.tool_use("Read", {"file_path": "missing.txt"}),
        Reply.text("Hello Bob."),
    )
    await run_turn(conversation, "greet Bob", alice)
    out = tmp_path / "session.jsonl"
    out.write_text(await sync_to_async(export_text)(conversation, include_hidden=True))
    await sync_to_async(assert_read_cleanly)(out)

    from claude_code_log.converter import convert_jsonl_to_html

    with contextlib.redirect_stdout(io.StringIO()):
        html_path = await sync_to_async(convert_jsonl_to_html)(
            out, tmp_path / "session.html", use_cache=False, silent=True
        )
    html = Path(html_path).read_text()
    assert "Hello Bob." in html and "greet Bob" in html

    copy = await sync_to_async(import_transcript)(bob.pk, out.read_bytes())
    original = await sync_to_async(visible_rows)(conversation)
    assert await sync_to_async(visible_rows)(copy.conversation) == original


def test_a_call_the_file_never_answers_is_closed_so_the_next_request_is_valid():
    lines = [
        {"type": "user", "message": {"role": "user", "content": "list it"}},
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}],
            },
        },
    ]
    parsed = parse_transcript("".join(json.dumps(x) + "\n" for x in lines))
    closing, note = parsed.messages[-2:]
    assert closing.role == "user" and closing.lines == ()
    assert closing.content == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": "Not run in this import: the session file ends before this tool call's "
            "result, and the tool calls of an imported session are never run again.",
            "is_error": True,
        }
    ]
    # The turn is closed too: a new message starts one of its own.
    assert (note.role, note.kind, note.to_model, note.lines) == ("assistant", "notice", True, ())


def test_a_subagent_file_with_two_chains_keeps_the_second_beside_the_first():
    def line(uid, parent, role, text):
        return {
            "type": role,
            "uuid": uid,
            "parentUuid": parent,
            "isSidechain": True,
            "message": {"role": role, "content": text},
        }

    lines = [
        line("a1", None, "user", "first task"),
        line("b1", None, "user", "second task"),
        line("a2", "a1", "assistant", "first answer"),
        line("b2", "b1", "assistant", "second answer"),
    ]
    parsed = parse_transcript("".join(json.dumps(x) + "\n" for x in lines))
    assert parsed.only_subagent
    assert [text_of(m.content) for m in parsed.messages] == ["first task", "first answer"]
    [other] = parsed.subagents
    assert [text_of(m.content) for m in other.messages] == ["second task", "second answer"]
