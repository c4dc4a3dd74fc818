"""The agent loop on its own: `core.runner.Runner` driven through in-memory ports.

No Django, no HTTP, no database: the model answers from a script (`tests/support/recording_ports.py`,
as strict about requests as the fake Anthropic server), the rules decide with the core's own
`decide`, rows and events are recorded in lists. What the services add around the loop
(storage, the channel layer, the real SDK) is proven once more end to end in
`tests/runs/test_agent_loop.py`.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace

import pytest

from skills_app.core.events import BlockStarted, ModelCalled, TextDelta, ThinkingDelta
from skills_app.core.hooks import HookResult, Hooks
from skills_app.core.llm import ModelError
from skills_app.core.transcript import STOPPED_RESULT, close_open_tool_uses
from tests.support.fake_anthropic import Reply, tool_use_block, without_cache_control
from tests.support.loop_helpers import write_skills
from tests.support.recording_ports import ALLOW_CONVERSATION, ALLOW_ONCE, DENY, Chat, rule


@pytest.fixture
def skills(tmp_path):
    return write_skills(tmp_path / "skills")


@pytest.fixture
def chat(tmp_path, skills):
    return Chat(tmp_path, skills_dir=skills)


def texts(rows):
    return ["".join(b.get("text", "") for b in r.content if b.get("type") == "text") for r in rows]


# -- answers and tools --------------------------------------------------------------------------


async def test_it_streams_a_plain_answer_and_stores_it(chat):
    chat.model.enqueue(Reply.text("Hello there, how can I help?", chunk=4))
    outcome = await chat.turn("hi")
    assert (outcome.status, outcome.stop_reason, outcome.model_calls) == ("done", "end_turn", 1)
    assert [(r.role, r.kind) for r in chat.rows] == [("user", "text"), ("assistant", "text")]
    assert chat.rows[1].content == ({"type": "text", "text": "Hello there, how can I help?"},)
    assert chat.rows[1].meta["usage"]["output_tokens"] > 0
    deltas = [e for e in chat.ports.events if isinstance(e, TextDelta)]
    assert [d.text for d in deltas] == ["Hell", "o th", "ere,", " how", " can", " I h", "elp?"]
    called = [e for e in chat.ports.events if isinstance(e, ModelCalled)]
    assert [(c.call, c.model) for c in called] == [(1, chat.model.model)]
    assert called[0].request is chat.calls[0].request


async def test_a_model_call_crosses_into_the_ports_once(chat):
    """The runner hands each call to `ports.call_model` and reads the core's own events back:
    it neither announces the call nor relays its deltas through the ports itself."""
    crossings: list[tuple[str, object]] = []
    call_model, emit = chat.ports.call_model, chat.ports.emit

    def counted_call(request, **how):
        crossings.append(("call_model", how["call"]))
        return call_model(request, **how)

    async def counted_emit(event):
        crossings.append(("emit", event.type))
        await emit(event)

    chat.ports.call_model, chat.ports.emit = counted_call, counted_emit
    chat.model.enqueue(
        Reply.tool_use("Glob", {"pattern": "*"}), Reply.text("Nothing in here.", chunk=3)
    )
    outcome = await chat.turn("what is there?", answer=ALLOW_ONCE)
    assert outcome.status == "done" and outcome.model_calls == 2
    assert [c for c in crossings if c[0] == "call_model"] == [("call_model", 1), ("call_model", 2)]
    streamed = {"model.call", "block.start", "text.delta", "thinking.delta", "block.done"}
    assert [c for c in crossings if c[0] == "emit" and c[1] in streamed] == []
    # What the call produced still reached whoever watches the run, through the port.
    assert [e.call for e in chat.ports.events if isinstance(e, ModelCalled)] == [1, 2]
    assert chat.ports.streamed_text() == "Nothing in here."


async def test_it_answers_a_tool_use_and_sends_the_result_back(chat):
    (chat.workspace.work_dir / "notes.txt").write_text("alpha\nbeta\n")
    chat.model.enqueue(
        Reply.tool_use("Read", {"file_path": "work/notes.txt"}, text="Let me read it."),
        Reply.text("It says alpha and beta."),
    )
    outcome = await chat.turn("what is in notes?")
    assert outcome.status == "done" and outcome.model_calls == 2
    second = chat.calls[1]
    assistant, user = second.messages[1], second.messages[2]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use"]
    assert user["content"][0]["type"] == "tool_result"
    assert "alpha" in str(user["content"][0]["content"])
    starts = [e for e in chat.ports.events if isinstance(e, BlockStarted)]
    assert [(s.block_type, s.tool_name) for s in starts] == [
        ("text", None),
        ("tool_use", "Read"),
        ("text", None),
    ]


async def test_the_turn_limit_ends_the_run_with_a_clear_message(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, max_turns=3)
    chat.model.set_responder(lambda call: Reply.tool_use("Glob", {"pattern": "*"}))
    outcome = await chat.turn("loop forever")
    assert (outcome.status, outcome.error_kind) == ("failed", "turn_limit")
    assert "turn limit" in outcome.error
    assert len(chat.calls) == 3
    assert chat.rows[-1].kind == "error" and chat.rows[-1].to_model is False


async def test_a_pre_tool_use_hook_can_block_a_call(tmp_path, skills):
    hooks = Hooks()

    def no_shell(payload):
        if payload["tool_name"] == "Bash":
            return HookResult(block=True, reason="no shell on Sundays")
        return None

    hooks.add("PreToolUse", no_shell)
    chat = Chat(tmp_path, skills_dir=skills, hooks=hooks, answer=ALLOW_ONCE)
    chat.model.enqueue(Reply.tool_use("Bash", {"command": "ls"}), Reply.text("ok"))
    await chat.turn("ls")
    result = chat.calls[1].messages[-1]["content"][0]
    assert result["is_error"] is True and "no shell on Sundays" in result["content"]
    assert chat.ports.asked == []  # blocked before anyone was asked


# -- skills: the meta-message profile -------------------------------------------------------------


async def test_a_model_invoked_skill_delivers_status_and_hidden_body_once(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill(greeter)", rule_id=7)])
    chat.model.enqueue(
        Reply.tool_use("Skill", {"skill": "greeter", "args": "Bob"}, text="Loading it."),
        Reply.text("Hello Bob!"),
    )
    outcome = await chat.turn("please greet Bob")
    assert outcome.status == "done"
    assert chat.ports.kinds() == [
        ("user", "text", False),
        ("assistant", "tool_use", False),
        ("user", "tool_result", False),
        ("user", "skill_status", False),
        ("user", "skill_prompt", True),
        ("assistant", "text", False),
    ]
    result = chat.rows[2].content[0]
    assert result["content"] == "Launching skill: greeter" and not result.get("is_error")
    status = chat.rows[3].content[0]["text"]
    assert status.startswith('<command-message>The "greeter" skill is loading</command-message>')
    assert "<command-args>Bob</command-args>" in status
    hidden = chat.rows[4].content[0]["text"]
    assert hidden.startswith(f"Base directory for this skill: {chat.workspace.skills_dir}")
    assert "GREETER-BODY-MARKER: greet Bob warmly" in hidden
    # The request after the call carries the body once, in the user turn after the result.
    follow_up = chat.calls[1]
    assert follow_up.count("GREETER-BODY-MARKER") == 1
    user_turn = follow_up.messages[-1]
    assert [b["type"] for b in user_turn["content"]] == ["tool_result", "text", "text"]
    assert "GREETER-BODY-MARKER" not in str(user_turn["content"][0])
    (invocation,) = chat.ports.invocations
    assert (invocation.caller, invocation.decision, invocation.args) == ("model", "allowed", "Bob")
    assert "Skill(greeter)" in invocation.decided_by
    assert invocation.injected_text == hidden and len(invocation.digest) == 64
    # The hidden row is linked to the invocation's audit.
    assert chat.ports.invocation_rows[1][-1] is chat.rows[4]
    assert (chat.workspace.skills_dir / "greeter" / "SKILL.md").is_file()  # staged


async def test_the_skill_catalog_is_in_the_tool_description_not_the_bodies(chat):
    chat.model.enqueue(Reply.text("ok"))
    await chat.turn("hi")
    description = chat.calls[0].tool("Skill")["description"]
    assert '"greeter": Greets someone by name' in description
    assert "manual-only" not in description
    assert "GREETER-BODY-MARKER" not in str(chat.calls[0].body)


async def test_a_slash_command_delivers_the_skill_without_a_tool_call(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill")])
    chat.model.enqueue(Reply.text("Hi Carol!"))
    assert (await chat.turn("/greeter Carol")).status == "done"
    assert [(r.kind, r.is_meta, r.to_model) for r in chat.rows] == [
        ("command", False, False),
        ("skill_status", False, True),
        ("skill_prompt", True, True),
        ("text", False, True),
    ]
    request = chat.calls[0]
    assert "tool_use" not in str(request.messages)
    assert request.count("GREETER-BODY-MARKER: greet Carol") == 1
    assert chat.ports.invocations[0].caller == "user"


async def test_stacked_slash_commands_load_each_skill(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill")])
    chat.model.enqueue(Reply.text("done"))
    await chat.turn("/greeter /manual-only Dan")
    assert sorted(i.skill for i in chat.ports.invocations) == ["greeter", "manual-only"]


async def test_an_unknown_slash_word_is_ordinary_text(chat):
    chat.model.enqueue(Reply.text("That is a path."))
    await chat.turn("/usr/bin is a folder")
    assert chat.rows[0].content == ({"type": "text", "text": "/usr/bin is a folder"},)
    assert chat.ports.invocations == []


@pytest.mark.parametrize(
    "tool_input, code",
    [
        ({"skill": ""}, "empty_name"),
        ({"skill": "nope"}, "unknown_skill"),
        ({"skill": "manual-only"}, "model_invocation_disabled"),
        ({"skill": "Bash"}, "not_a_skill"),
        ({"skill": "greeter"}, "permission_denied"),
    ],
)
async def test_each_failed_model_invocation_returns_an_error_and_delivers_nothing(
    tmp_path, skills, tool_input, code
):
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill(greeter)", "deny")])
    chat.model.enqueue(Reply.tool_use("Skill", tool_input), Reply.text("ok"))
    await chat.turn("go")
    result = chat.rows[2].content[0]
    assert result["type"] == "tool_result" and result["is_error"] is True
    assert not [r for r in chat.rows if r.kind in {"skill_status", "skill_prompt"}]
    (invocation,) = chat.ports.invocations
    assert invocation.error_code == code
    assert invocation.decision == ("denied" if code == "permission_denied" else "failed")


async def test_the_legacy_command_key_is_accepted(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill")])
    chat.model.enqueue(Reply.tool_use("Skill", {"command": "greeter"}), Reply.text("ok"))
    await chat.turn("go")
    assert [(i.skill, i.decision) for i in chat.ports.invocations] == [("greeter", "allowed")]


async def test_a_slash_command_for_a_model_only_skill_is_refused(chat):
    outcome = await chat.turn("/model-only")
    assert outcome.status == "done" and outcome.stop_reason == "skill_failed"
    assert chat.ports.invocations[0].error_code == "user_invocation_disabled"
    assert chat.model.calls == []  # nothing was delivered, so the model was not called
    assert chat.rows[-1].kind == "error" and "user-invocable" in texts(chat.rows)[-1]


async def test_reinvoking_an_unchanged_skill_adds_an_already_loaded_note(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill")])
    chat.model.enqueue(Reply.text("one"), Reply.text("two"))
    await chat.turn("/greeter Eve")
    await chat.turn("/greeter Eve")
    hidden = [r for r in chat.rows if r.kind == "skill_prompt"]
    assert "GREETER-BODY-MARKER" in hidden[0].content[0]["text"]
    assert "already loaded" in hidden[1].content[0]["text"]
    assert chat.calls[-1].count("GREETER-BODY-MARKER") == 1
    assert chat.ports.invocations[1].already_loaded


# -- a skill's context: for its turn only ---------------------------------------------------------


async def test_allowed_tools_apply_only_until_the_next_user_message(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill")], answer=DENY)
    chat.model.enqueue(
        Reply.tool_use("Skill", {"skill": "echoer"}),
        Reply.tool_use("Bash", {"command": "echo first"}),
        Reply.text("echoed"),
    )
    await chat.turn("echo please")
    first = chat.calls[2].messages[-1]["content"][0]
    assert "first" in str(first["content"]) and not first.get("is_error")
    assert chat.ports.asked == []  # the skill's allowed-tools covered it
    # The next user message ends the skill's turn: Bash falls back to ask (denied here).
    chat.model.enqueue(Reply.tool_use("Bash", {"command": "echo second"}), Reply.text("no"))
    await chat.turn("again")
    last = chat.calls[-1].messages[-1]["content"][0]
    assert last["is_error"] is True and "denied" in last["content"]
    assert [a.call.input["command"] for a in chat.ports.asked] == ["echo second"]


async def test_an_admin_deny_beats_a_skills_allowed_tools(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill"), rule("Bash(echo *)", "deny")])
    chat.model.enqueue(
        Reply.tool_use("Skill", {"skill": "echoer"}),
        Reply.tool_use("Bash", {"command": "echo hi"}),
        Reply.text("ok"),
    )
    await chat.turn("echo")
    result = chat.calls[2].messages[-1]["content"][0]
    assert result["is_error"] is True and "Bash(echo *)" in result["content"]


async def test_a_skills_model_applies_for_the_rest_of_its_turn_only(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill")])
    chat.model.enqueue(
        Reply.tool_use("Skill", {"skill": "switcher"}), Reply.text("switched"), Reply.text("back")
    )
    await chat.turn("switch")
    await chat.turn("next")
    assert [c.request.model for c in chat.calls] == [
        chat.config.model,
        "claude-haiku-4-5",
        chat.config.model,
    ]


async def test_a_skills_disallowed_tools_leave_the_request_for_its_turn(tmp_path):
    skills = write_skills(
        tmp_path / "skills",
        {
            "no-shell": "---\nname: no-shell\ndescription: Works without a shell.\n"
            "disallowed-tools: Bash\n---\nNO-SHELL-BODY\n"
        },
    )
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill")])
    chat.model.enqueue(
        Reply.tool_use("Skill", {"skill": "no-shell"}), Reply.text("done"), Reply.text("later")
    )
    await chat.turn("use no-shell")
    await chat.turn("and now?")
    before, during, next_turn = chat.calls
    assert "Bash" in before.tool_names and "Bash" not in during.tool_names
    assert "Bash" in next_turn.tool_names


async def test_a_bare_admin_deny_removes_the_tool_from_the_request(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Bash", "deny")])
    chat.model.enqueue(Reply.text("ok"))
    await chat.turn("hi")
    assert "Bash" not in chat.calls[0].tool_names and "Read" in chat.calls[0].tool_names


async def test_a_bare_skill_deny_removes_the_skill_tool(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill", "deny")])
    chat.model.enqueue(Reply.text("ok"))
    await chat.turn("hi")
    assert "Skill" not in chat.calls[0].tool_names


# -- approvals ------------------------------------------------------------------------------------


async def test_an_ask_is_put_to_the_user_and_allow_once_runs_the_call(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, answer=ALLOW_ONCE)
    chat.model.enqueue(
        Reply.tool_use("Bash", {"command": "echo approved"}),
        Reply.tool_use("Bash", {"command": "echo approved"}),
        Reply.text("ok"),
    )
    await chat.turn("echo")
    assert [a.call.input["command"] for a in chat.ports.asked] == ["echo approved"] * 2
    result = chat.calls[1].messages[-1]["content"][0]
    assert "approved" in str(result["content"]) and not result.get("is_error")
    assert [type(e).__name__ for e in chat.ports.events if "Approval" in type(e).__name__] == [
        "ApprovalRequested",
        "ApprovalAnswered",
    ] * 2


async def test_allowing_for_the_conversation_asks_once(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, answer=ALLOW_CONVERSATION)
    chat.model.enqueue(
        Reply.tool_use("Bash", {"command": "echo one"}),
        Reply.tool_use("Bash", {"command": "echo one"}),
        Reply.text("ok"),
    )
    await chat.turn("echo twice")
    assert len(chat.ports.asked) == 1  # the grant answers the second call
    second = chat.calls[2].messages[-1]["content"][0]
    assert "one" in str(second["content"]) and not second.get("is_error")


async def test_a_denied_call_returns_an_error_result_and_the_loop_goes_on(chat):
    chat.model.enqueue(Reply.tool_use("Bash", {"command": "rm -rf work"}), Reply.text("ok"))
    outcome = await chat.turn("clean")
    assert outcome.status == "done"
    result = chat.calls[1].messages[-1]["content"][0]
    assert result["is_error"] is True and "denied by the user" in result["content"]


# -- stops ----------------------------------------------------------------------------------------


async def test_stopping_mid_stream_keeps_the_partial_answer_and_a_valid_history(chat):
    gate, reached = asyncio.Event(), asyncio.Event()
    chat.model.enqueue(
        Reply.text(
            "The first part is here. " * 5,
            chunk=5,
            wait_for=gate,
            wait_after_events=6,
            reached=reached,
        )
    )
    run = asyncio.ensure_future(chat.turn("talk"))
    await asyncio.wait_for(reached.wait(), 5)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    last = chat.rows[-1]
    assert last.role == "assistant" and last.meta.get("partial") is True
    # The block's start and five pieces of five characters arrived before the stop.
    assert last.content[0]["text"] == ("The first part is here. " * 5)[:25]
    chat.model.enqueue(Reply.text("continuing"))
    assert (await chat.turn("go on")).status == "done"  # the strict model took the history


async def test_stopping_during_an_approval_answers_the_tool_use(tmp_path, skills):
    asked = asyncio.Event()

    async def nobody_answers(call):
        asked.set()
        await asyncio.Event().wait()
        return DENY

    chat = Chat(tmp_path, skills_dir=skills, answer=nobody_answers)
    chat.model.enqueue(Reply.tool_use("Bash", {"command": "rm -rf work"}))
    run = asyncio.ensure_future(chat.turn("clean"))
    await asyncio.wait_for(asked.wait(), 5)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert chat.ports.asked[0].answer == "cancelled"
    assert close_open_tool_uses(chat.rows) == []  # every tool_use has its result
    # Closed as stopped by the person, so the model answers their next message (issue 29).
    assert chat.rows[-1].meta == {"stopped": True}
    assert chat.rows[-1].content[0]["content"] == STOPPED_RESULT
    chat.model.enqueue(Reply.text("ok"))
    await chat.turn("never mind")
    assert STOPPED_RESULT in str(chat.calls[-1].messages)


# -- model faults and refusals --------------------------------------------------------------------


@pytest.mark.parametrize(
    "reply, kind",
    [
        (Reply.error(529, "overloaded_error", "Overloaded"), "overloaded"),
        (Reply.error(500, "api_error", "boom"), "server"),
        (Reply.error(401, "authentication_error", "bad key"), "auth"),
        (Reply.text("partial words here and more", chunk=3, cut_after_events=4), "stream_cut"),
        (Reply.text("no stop event", no_message_stop=True), "stream_cut"),
        (
            Reply.blocks(
                [{"type": "text", "text": "Calling."}, tool_use_block("Read", {"file_path": "x"})],
                cut_after_events=5,
            ),
            "stream_cut",
        ),
        (Reply.tool_use("Read", raw_json='{"file_path": '), "invalid_tool_json"),
    ],
)
async def test_each_model_fault_fails_the_run_readably_and_keeps_history_valid(chat, reply, kind):
    chat.model.enqueue(reply)
    outcome = await chat.turn("hello")
    assert (outcome.status, outcome.error_kind) == ("failed", kind)
    assert outcome.error and "Traceback" not in outcome.error
    assert chat.rows[-1].kind == "error" and chat.rows[-1].to_model is False
    assert not [r for r in chat.rows if any(b.get("type") == "tool_use" for b in r.content)]
    chat.model.enqueue(Reply.text("recovered"))
    assert (await chat.turn("try again")).status == "done"


async def test_a_cut_answer_keeps_the_text_that_arrived(chat):
    chat.model.enqueue(Reply.text("partial words here and more", chunk=3, cut_after_events=4))
    await chat.turn("hello")
    partial = [r for r in chat.rows if r.meta.get("partial")]
    assert [r.content[0]["text"] for r in partial] == ["partial w"]


async def test_a_refusal_leaves_the_turn_out_of_later_requests_and_stops_there(tmp_path, skills):
    hooks = Hooks()
    hooks.add("Stop", lambda payload: HookResult(continue_=True, reason="keep going"))
    chat = Chat(tmp_path, skills_dir=skills, hooks=hooks)
    outcome = await chat.turn("please [[refuse]] this")
    assert outcome.status == "done" and outcome.stop_reason == "refusal"
    assert len(chat.calls) == 1  # the Stop hook did not continue what was declined
    assert chat.rows[0].meta.get("excluded") == "refusal"
    assert chat.rows[-1].meta.get("code") == "refusal"
    chat.model.enqueue(Reply.text("fine"))
    await chat.turn("something else")
    assert "[[refuse]]" not in str(chat.calls[-1].messages)


# -- forks ----------------------------------------------------------------------------------------


async def test_a_forked_skill_runs_as_a_subagent_and_only_its_answer_returns(tmp_path):
    skills = write_skills(
        tmp_path / "skills",
        {
            "researcher": "---\nname: researcher\ndescription: Looks things up alone.\n"
            "context: fork\n---\nRESEARCH-BODY: find $ARGUMENTS\n"
        },
    )
    chat = Chat(tmp_path, skills_dir=skills, rules=[rule("Skill")])
    chat.model.enqueue(
        Reply.tool_use("Skill", {"skill": "researcher", "args": "owls"}),
        Reply.text("Owls are birds (SUBAGENT-ANSWER)."),
        Reply.text("They are birds."),
    )
    outcome = await chat.turn("what are owls?")
    assert outcome.status == "done"
    parent_first, child, parent_second = chat.calls
    assert "RESEARCH-BODY: find owls" in str(child.messages)
    assert "RESEARCH-BODY" not in str(parent_second.messages)  # the body stayed in the child
    result = parent_second.messages[-1]["content"][0]
    assert "SUBAGENT-ANSWER" in str(result["content"])
    (subagent,) = chat.subagents
    assert all(r.to_model is False for r in subagent.rows)


# -- the other delivery profiles ------------------------------------------------------------------


async def test_the_tool_result_profile_returns_the_body_in_the_tool_result(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, profile="tool-result")
    chat.model.enqueue(Reply.tool_use("load_skill", {"name": "greeter"}), Reply.text("ok"))
    await chat.turn("greet")
    assert "load_skill" in chat.calls[0].tool_names and "Skill" not in chat.calls[0].tool_names
    assert "greeter" in chat.calls[0].system_text  # the catalog is in the system prompt
    result = chat.calls[1].messages[-1]["content"][0]
    assert result["content"].startswith('<skill name="greeter">\nGREETER-BODY-MARKER')
    assert chat.calls[1].count("GREETER-BODY-MARKER") == 1
    assert any(r.is_meta for r in chat.rows)  # the injected text is stored as hidden
    assert chat.ports.invocations[0].decision == "allowed"


async def test_the_system_prompt_profile_loads_the_body_into_the_system_prompt(tmp_path, skills):
    chat = Chat(tmp_path, skills_dir=skills, profile="system-prompt", rules=[rule("Skill")])
    chat.model.enqueue(
        Reply.tool_use("skill_load", {"skill": "greeter", "args": "Ada"}), Reply.text("ok")
    )
    await chat.turn("greet")
    before, after = chat.calls
    assert "skill_load" in before.tool_names and "GREETER-BODY-MARKER" not in before.system_text
    assert "GREETER-BODY-MARKER: greet Ada warmly" in after.system_text
    assert "GREETER-BODY-MARKER" not in str(after.messages)
    assert any(r.is_meta for r in chat.rows)
    assert chat.ports.invocations[0].skill == "greeter"


# -- the fake is as strict as the API -------------------------------------------------------------


@pytest.mark.parametrize(
    "messages, complaint",
    [
        ([{"role": "user", "content": []}], "content"),
        ([{"role": "user", "content": [{"type": "text", "text": ""}]}], "empty"),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "calling"},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}],
                },
            ],
            "tool_use",
        ),
        ([{"role": "assistant", "content": "first"}], "user"),
    ],
)
async def test_the_scripted_model_rejects_what_the_api_rejects(chat, messages, complaint):
    from skills_app.core.llm import ModelRequest

    request = ModelRequest(
        model=chat.model.model, system="s", tools=[], messages=messages, max_tokens=100
    )
    chat.model.enqueue(Reply.text("never sent"))
    with pytest.raises(ModelError) as refused:
        async for _event in chat.model.stream(request):
            pass
    assert refused.value.kind == "bad_request"
    assert complaint in chat.model.rejected[0].rejection


async def test_thinking_blocks_go_back_to_the_model_unchanged_in_a_tool_loop(tmp_path, skills):
    """With thinking on, the model's signed thinking must be replayed as it came (the scripted
    model rejects a tool loop that drops or alters it, as the API does)."""
    chat = Chat(tmp_path, skills_dir=skills, thinking=True, answer=ALLOW_ONCE)
    chat.model.enqueue(Reply.tool_use("Glob", {"pattern": "*"}), Reply.text("Nothing there."))
    outcome = await chat.turn("what files are there?")
    assert outcome.status == "done"
    first_answer = chat.calls[1].messages[1]["content"]
    assert first_answer[0]["type"] == "thinking" and first_answer[0]["signature"]
    assert [r.kind for r in chat.rows if r.role == "assistant"] == ["tool_use", "text"]
    assert any(isinstance(e, ThinkingDelta) for e in chat.ports.events)
    # Negative control: the same request with the thinking altered is refused, as by the API.
    altered = copy.deepcopy(chat.calls[1].messages)
    altered[1]["content"][0]["thinking"] += " (edited)"
    request = replace(chat.calls[1].request, messages=without_cache_control(altered))
    with pytest.raises(ModelError):
        async for _event in chat.model.stream(request):
            pass
    assert "thinking" in chat.model.rejected[-1].rejection
