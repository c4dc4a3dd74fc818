"""The agent loop end to end: the real SDK against the fake Anthropic server, the database, the
channel layer, the supervisor and the recorder.

The loop's own behaviour (skills in every profile, approvals, rules, forks, refusals, faults,
stops) is tested in memory, without any of these, in `tests/core/test_core_loop.py`. Here each test
proves that the services wire that loop to the world: what is streamed, stored, audited and
announced, and what the SDK retries or reports.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async

from skills_app.core.hooks import HookResult
from skills_app.models import (
    Conversation,
    ModelCall,
    PermissionRule,
    Run,
    RunEvent,
    SkillInvocation,
    StreamPiece,
)
from skills_app.runs import agent_setup
from skills_app.runs.streams import LIVE_INTERVAL
from tests.support.fake_anthropic import Reply, tool_use_block, without_cache_control
from tests.support.frames import parse
from tests.support.loop_helpers import (
    accepted,
    count_in_request,
    rows,
    run_turn,
    use_fake_model,
    wait_until,
    watch_group,
    write_skills,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(settings, fake_anthropic, tmp_path):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    settings.AGENT_HOOKS = {"UserPromptSubmit": [], "PreToolUse": [], "PostToolUse": [], "Stop": []}
    return fake_anthropic


@pytest.fixture
def conversation(alice):
    return Conversation.objects.create(owner=alice, title="test")


def allow(rule_text, skill=""):
    return PermissionRule.objects.create(behavior="allow", rule_text=rule_text, skill=skill)


def deny(rule_text):
    return PermissionRule.objects.create(behavior="deny", rule_text=rule_text)


async def test_it_streams_a_plain_answer_and_stores_it(setup, conversation, alice):
    setup.enqueue(Reply.text("Hello there, how can I help?", chunk=4))
    async with watch_group(conversation.pk) as seen:
        run = await run_turn(conversation, "hi", alice)
    assert run.status == Run.DONE
    stored = await sync_to_async(rows)(conversation)
    assert [(m.role, m.kind) for m in stored] == [("user", "text"), ("assistant", "text")]
    assert stored[1].content == [{"type": "text", "text": "Hello there, how can I help?"}]
    deltas = [m["event"] for m in seen if m["type"] == "text.delta"]
    assert "".join(d["text"] for d in deltas) == "Hello there, how can I help?"
    # Each live piece says where it goes: the run, its model call, the block and the offset.
    offsets = [d["offset"] for d in deltas]
    assert offsets == [sum(len(d["text"]) for d in deltas[:i]) for i in range(len(deltas))]
    assert {(d["run_id"], d["call"], d["index"]) for d in deltas} == {(run.pk, 1, 0)}
    assert run.usage.get("output_tokens", 0) > 0


async def test_it_coalesces_text_deltas_into_few_frames_and_fewer_writes(
    setup, conversation, alice
):
    setup.enqueue(Reply.text("x" * 2000, chunk=1, delay=0.001))
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with watch_group(conversation.pk) as seen:
        await run_turn(conversation, "long please", alice)
    took = loop.time() - started
    frames = [m for m in seen if m["type"] == "text.delta"]
    assert "".join(m["event"]["text"] for m in frames) == "x" * 2000
    # 2,000 deltas: at most one live frame per 50 ms on average (a burst of two, the last one).
    assert len(frames) <= took / LIVE_INTERVAL + 4
    # Committed before they were sent: one piece per frame at most, never one per delta, and
    # none in the event log (the row holds the text; the pieces went with the run).
    assert not await RunEvent.objects.filter(conversation=conversation, type="text.saved").aexists()
    assert not await RunEvent.objects.filter(conversation=conversation, type="text.delta").aexists()


async def test_a_model_invoked_skill_delivers_status_and_hidden_body_once(
    setup, conversation, alice
):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    setup.enqueue(
        Reply.tool_use("Skill", {"skill": "greeter", "args": "Bob"}, text="Loading it."),
        Reply.text("Hello Bob!"),
    )
    run = await run_turn(conversation, "please greet Bob", alice)
    assert run.status == Run.DONE
    stored = await sync_to_async(rows)(conversation)
    kinds = [(m.role, m.kind, m.is_meta) for m in stored]
    assert kinds == [
        ("user", "text", False),
        ("assistant", "tool_use", False),
        ("user", "tool_result", False),
        ("user", "skill_status", False),
        ("user", "skill_prompt", True),
        ("assistant", "text", False),
    ]
    result = stored[2].content[0]
    assert result["content"] == "Launching skill: greeter" and not result.get("is_error")
    status = stored[3].content[0]["text"]
    assert status.startswith('<command-message>The "greeter" skill is loading</command-message>')
    assert "<command-args>Bob</command-args>" in status
    hidden = stored[4].content[0]["text"]
    assert hidden.startswith("Base directory for this skill: ")
    assert "GREETER-BODY-MARKER: greet Bob warmly" in hidden
    # The request after the tool call carries the body exactly once, in the user turn after the result.
    follow_up = accepted(setup)[1]
    assert count_in_request(follow_up, "GREETER-BODY-MARKER") == 1
    user_turn = follow_up["messages"][-1]
    assert user_turn["role"] == "user"
    assert [b["type"] for b in user_turn["content"]] == ["tool_result", "text", "text"]
    assert "GREETER-BODY-MARKER" not in str(user_turn["content"][0])
    invocation = await SkillInvocation.objects.aget(conversation=conversation)
    assert (invocation.caller, invocation.decision, invocation.args) == ("model", "allowed", "Bob")
    assert (
        'rule "Skill(greeter)"' in invocation.decided_by
        or "Skill(greeter)" in invocation.decided_by
    )
    assert invocation.injected_text == hidden
    assert len(invocation.digest) == 64


async def test_a_slash_command_delivers_the_skill_without_a_tool_call(setup, conversation, alice):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    setup.enqueue(Reply.text("Hi Carol!"))
    run = await run_turn(conversation, "/greeter Carol", alice)
    assert run.status == Run.DONE
    stored = await sync_to_async(rows)(conversation)
    assert [(m.kind, m.is_meta, m.to_model) for m in stored] == [
        # What the user typed, kept for people (the model gets the skill's rows instead).
        ("command", False, False),
        ("skill_status", False, True),
        ("skill_prompt", True, True),
        ("text", False, True),
    ]
    request = accepted(setup)[0]
    assert "tool_use" not in str(request["messages"])
    assert count_in_request(request, "GREETER-BODY-MARKER: greet Carol") == 1
    invocation = await SkillInvocation.objects.aget(conversation=conversation)
    assert invocation.caller == "user"


def block_bash(payload):
    if payload["tool_name"] == "Bash":
        return HookResult(block=True, reason="no shell on Sundays")
    return None


async def test_a_pre_tool_use_hook_can_block_a_call(setup, conversation, alice, settings):
    settings.AGENT_HOOKS = {
        **settings.AGENT_HOOKS,
        "PreToolUse": ["tests.runs.test_agent_loop.block_bash"],
    }
    setup.enqueue(Reply.tool_use("Bash", {"command": "ls"}), Reply.text("ok"))
    await run_turn(conversation, "ls", alice, answer="allow_once")
    result = accepted(setup)[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and "no shell on Sundays" in result["content"]


async def test_stopping_mid_stream_keeps_the_partial_answer_and_a_valid_history(
    setup, conversation, alice
):
    from skills_app.runs import supervisor as runs

    gate, reached = threading.Event(), threading.Event()
    setup.enqueue(
        Reply.text(
            "The first part is here. " * 5,
            chunk=5,
            wait_for=gate,
            wait_after_events=6,
            reached=reached,
        )
    )
    run = await runs.start_run(conversation.pk, "talk", user_id=alice.pk)
    await asyncio.get_running_loop().run_in_executor(None, reached.wait, 10)
    streamed = StreamPiece.objects.filter(run_id=run.pk)
    await wait_until(streamed.aexists, what="a saved piece of streamed text")
    assert await runs.stop_run(run.pk)
    gate.set()
    run = await Run.objects.aget(pk=run.pk)
    assert run.status == Run.STOPPED
    stored = await sync_to_async(rows)(conversation)
    # The partial answer, then the stored note that says it was stopped.
    assert stored[-2].role == "assistant" and stored[-2].meta.get("partial") is True
    assert stored[-2].content[0]["text"].startswith("The first")
    assert (stored[-1].kind, stored[-1].content[0]["text"]) == ("notice", "Stopped.")
    # The call that was stopped is closed as such, without usage (the API never said).
    call = await ModelCall.objects.aget(run_id=run.pk)
    assert (call.error_kind, call.cost_usd) == ("stopped", None) and call.finished_at is not None
    setup.enqueue(Reply.text("continuing"))
    await run_turn(conversation, "go on", alice)
    assert setup.requests[-1].status == 200


async def test_stopping_during_an_approval_answers_the_tool_use(setup, conversation, alice):
    from skills_app.models import Approval
    from skills_app.runs import supervisor as runs

    setup.enqueue(Reply.tool_use("Bash", {"command": "rm -rf work"}))
    run = await runs.start_run(conversation.pk, "clean", user_id=alice.pk)
    await wait_until(Approval.objects.filter(run_id=run.pk).aexists, what="the approval request")
    assert await runs.stop_run(run.pk)
    # Stop waits a bounded time for the run's clean-up; on a loaded machine it may end after.
    cancelled = Approval.objects.filter(run_id=run.pk, status=Approval.CANCELLED)
    await wait_until(cancelled.aexists, what="the approval cancelled by the stop")
    setup.enqueue(Reply.text("ok"))
    await run_turn(conversation, "never mind", alice)
    last = setup.requests[-1]
    assert last.status == 200
    assert "Stopped by the user before this tool call finished" in str(last["messages"])


async def test_a_stop_is_a_clean_end_and_the_next_message_is_answered_as_itself(
    setup, conversation, alice
):
    """Stopped while asking: the question is withdrawn for every tab, the note is a stored row,
    the call is closed as stopped for the model, and the next message starts a new request."""
    from skills_app.core.transcript import STOPPED_RESULT
    from skills_app.models import Approval, Message
    from skills_app.runs import supervisor as runs

    setup.enqueue(Reply.tool_use("Bash", {"command": "rm -rf work"}, id="toolu_stop01"))
    run = await runs.start_run(conversation.pk, "clean", user_id=alice.pk)
    await wait_until(Approval.objects.filter(run_id=run.pk).aexists, what="the approval request")
    async with watch_group(conversation.pk) as seen:
        assert await runs.stop_run(run.pk)
        finished = RunEvent.objects.filter(run_id=run.pk, type="run.finished")
        await wait_until(finished.aexists, what="the stopped run to finish")
    answered = [e.data async for e in RunEvent.objects.filter(run=run, type="approval.answered")]
    approval = await Approval.objects.aget(run_id=run.pk)
    assert answered == [{"approval_id": approval.pk, "status": "cancelled", "by": None}]
    # The tabs are told (they render the fragment that takes the buttons away).
    updates = [m for m in seen if m["type"] == "approval.answered"]
    assert updates and updates[0]["event"]["status"] == "cancelled"
    # The closed call is announced to the tabs as its stored row (its card then says stopped:
    # tests/chat/test_fragments.py).
    from skills_app.chat import relay

    shown = [
        await relay.frame(conversation.pk, m, can_inspect=False)
        for m in seen
        if m["type"] == "message.stored"
    ]
    frames = [parse(frame) for frame in shown if frame]
    results = [f["data"]["message_id"] for f in frames if f["data"]["kind"] == "tool_result"]
    closing = await Message.objects.aget(pk=results[0]) if results else None
    assert closing is not None and closing.content[0]["content"] == STOPPED_RESULT
    assert closing.meta.get("stopped") is True  # what makes its card say stopped
    note = await Message.objects.filter(conversation=conversation, kind="notice").alast()
    assert note is not None and note.content[0]["text"] == "Stopped." and not note.to_model

    setup.enqueue(Reply.text("A haiku about spring."))
    await run_turn(conversation, "write a haiku instead", alice)
    last = setup.requests[-1]
    assert last.status == 200
    final_user = last["messages"][-1]
    assert final_user["role"] == "user"
    closed = [b for b in final_user["content"] if b.get("type") == "tool_result"]
    assert closed == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_stop01",
            "content": STOPPED_RESULT,
            "is_error": True,
        }
    ]
    assert final_user["content"][-1]["text"] == "write a haiku instead"
    assert "Stopped." not in str(last["messages"])


async def test_a_run_that_ends_cancels_an_approval_nobody_waits_for(conversation, alice):
    """A stop between an approval's creation and the wait for it leaves nobody to answer it."""
    from skills_app.models import Approval, RunEvent
    from skills_app.runs import execute
    from skills_app.runs.recorder import RunRecorder

    run = await Run.objects.acreate(conversation=conversation, status=Run.RUNNING)
    approval = await Approval.objects.acreate(
        conversation=conversation, run=run, tool="Bash", call_text="Bash(ls)"
    )
    recorder = RunRecorder(conversation.pk, run.pk, alice.pk)
    await execute.finish(run.pk, recorder, Run.STOPPED, "Stopped by the user.", "stopped")
    assert (await Approval.objects.aget(pk=approval.pk)).status == Approval.CANCELLED
    answered = [e.data async for e in RunEvent.objects.filter(run=run, type="approval.answered")]
    assert answered == [{"approval_id": approval.pk, "status": "cancelled", "by": None}]


@pytest.mark.parametrize(
    "replies, kind",
    [
        ([Reply.error(529, "overloaded_error", "Overloaded")] * 3, "overloaded"),
        (
            [
                Reply.blocks(
                    [
                        {"type": "text", "text": "Calling."},
                        tool_use_block("Read", {"file_path": "x"}),
                    ],
                    cut_after_events=7,
                )
            ],
            "stream_cut",
        ),
    ],
)
async def test_each_model_fault_fails_the_run_readably_and_keeps_history_valid(
    setup, conversation, alice, replies, kind
):
    setup.enqueue(*replies)
    run = await run_turn(conversation, "hello", alice)
    assert run.status == Run.FAILED
    assert run.error_kind == kind
    assert run.error and "Traceback" not in run.error
    stored = await sync_to_async(rows)(conversation)
    assert stored[-1].kind == "error" and stored[-1].to_model is False
    assert not [m for m in stored if any(b.get("type") == "tool_use" for b in m.content)]
    setup.enqueue(Reply.text("recovered"))
    run = await run_turn(conversation, "try again", alice)
    assert run.status == Run.DONE
    assert setup.requests[-1].status == 200


async def test_a_429_is_retried_with_backoff_then_succeeds(setup, conversation, alice):
    setup.enqueue(Reply.error(429, "rate_limit_error", "slow down"), Reply.text("fine now"))
    run = await run_turn(conversation, "hi", alice)
    assert run.status == Run.DONE
    assert [r.status for r in setup.requests] == [429, 200]


async def test_build_request_is_a_pure_function_of_the_rows(setup, conversation, alice):
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    setup.enqueue(
        Reply.tool_use("Skill", {"skill": "greeter", "args": "Fay"}), Reply.text("Hi Fay")
    )
    await run_turn(conversation, "greet Fay", alice)
    one = await sync_to_async(agent_setup.build_request)(conversation)
    two = await sync_to_async(agent_setup.build_request)(conversation)
    assert one.as_kwargs() == two.as_kwargs()
    last_sent = accepted(setup)[-1]
    # Rebuilt from rows, the history equals what was sent (less its cache markers) plus the answer.
    sent_messages = without_cache_control(last_sent["messages"])
    assert one.messages[: len(sent_messages)] == sent_messages
    assert one.messages[-1]["role"] == "assistant"


async def test_a_bare_admin_deny_removes_the_tool_from_the_request(setup, conversation, alice):
    await PermissionRule.objects.acreate(behavior="deny", rule_text="Bash")
    setup.enqueue(Reply.text("ok"))
    await run_turn(conversation, "hi", alice)
    names = [t["name"] for t in accepted(setup)[0]["tools"]]
    assert "Bash" not in names and "Read" in names
