"""The offline demo model: each behaviour, decided only from the request."""

from __future__ import annotations

from typing import Any

from skills_app.core.demo import DemoModel, plan_reply, read_catalog
from skills_app.core.events import BlockDone, BlockStarted, MessageDone, ModelEvent, TextDelta
from skills_app.core.llm import ModelRequest
from tests.support.fake_anthropic import validate_request

SKILL_TOOL = {
    "name": "Skill",
    "description": (
        "Run a skill.\n\n<available_skills>\n"
        '"pdf": Extract text and tables from PDF files.\n'
        '"release-notes": Draft release notes from the git log.\n'
        "</available_skills>\n"
    ),
    "input_schema": {
        "type": "object",
        "properties": {"skill": {"type": "string"}, "args": {"type": "string"}},
        "required": ["skill"],
    },
}
BASH_TOOL = {
    "name": "Bash",
    "description": "Run a shell command.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}
LOAD_SKILL_TOOL = {
    "name": "load_skill",
    "description": "Load a skill by name.",
    "input_schema": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
}
BODY_WITH_BASH = (
    "Base directory for this skill: /skills/release-notes\n\n"
    "# Release notes\n\nCollect the commits since the last tag.\n\n"
    "```bash\n# list commits\ngit log --oneline \\\n  v1.0..HEAD\necho done\n```\n"
)
BODY_PLAIN = (
    "Base directory for this skill: /skills/pdf\n\n"
    "# PDF\n\nRead the file with the Read tool first.\nThen summarise each page.\n\nARGUMENTS: report.pdf"
)


def request(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, system: str = ""
) -> ModelRequest:
    return ModelRequest(
        model="demo",
        system=system,
        tools=[SKILL_TOOL, BASH_TOOL] if tools is None else tools,
        messages=messages,
        max_tokens=1000,
    )


def skill_call_turn(skill: str, args: str = "", tool_id: str = "toolu_s") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "text", "text": f'I\'ll use the "{skill}" skill for this.'},
            {
                "type": "tool_use",
                "id": tool_id,
                "name": "Skill",
                "input": {"skill": skill, "args": args},
            },
        ],
    }


def loaded_turn(skill: str, body: str, tool_id: str = "toolu_s") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": tool_id, "content": f"Launching skill: {skill}"},
            {
                "type": "text",
                "text": f'<command-message>The "{skill}" skill is loading</command-message>\n<command-name>{skill}</command-name>',
            },
            {"type": "text", "text": body},
        ],
    }


def text_of(reply_content: tuple[dict[str, Any], ...]) -> str:
    return "\n".join(b["text"] for b in reply_content if b["type"] == "text")


def test_it_reads_the_catalog_from_the_skill_tool() -> None:
    names = [e.name for e in read_catalog(request([{"role": "user", "content": "hi"}]))]
    assert names == ["pdf", "release-notes"]


def test_it_reads_the_catalog_from_the_system_prompt_for_load_skill() -> None:
    system = "You help.\n\nSkills available:\n  - pdf: Extract PDFs.\n  - git-helper: Git things.\n\nBe brief."
    catalog = read_catalog(
        request([{"role": "user", "content": "hi"}], tools=[LOAD_SKILL_TOOL], system=system)
    )
    assert [(e.name, e.description) for e in catalog] == [
        ("pdf", "Extract PDFs."),
        ("git-helper", "Git things."),
    ]


def test_a_plain_question_gets_an_honest_introduction() -> None:
    reply = plan_reply(request([{"role": "user", "content": "What is the capital of France?"}]))
    text = text_of(reply.content)
    assert reply.stop_reason == "end_turn"
    assert len(reply.content) == 1
    assert "offline demo model" in text
    assert "What is the capital of France?" in text
    assert "`pdf`" in text and "`release-notes`" in text
    assert "`/pdf`" in text


def test_without_skills_it_says_it_sees_none() -> None:
    reply = plan_reply(request([{"role": "user", "content": "hello"}], tools=[BASH_TOOL]))
    assert "can't see any skills" in text_of(reply.content)


def test_naming_a_skill_calls_it_with_the_rest_as_args() -> None:
    reply = plan_reply(
        request([{"role": "user", "content": "Please use the pdf skill on report.pdf pages 1-3"}])
    )
    assert reply.stop_reason == "tool_use"
    text, tool = reply.content
    assert text["text"] == 'I\'ll use the "pdf" skill for this.'
    assert tool["name"] == "Skill"
    assert tool["input"] == {"skill": "pdf", "args": "on report.pdf pages 1-3"}
    assert tool["id"].startswith("toolu_demo_")


def test_a_bare_skill_name_calls_it_with_empty_args() -> None:
    reply = plan_reply(request([{"role": "user", "content": "release-notes"}]))
    assert reply.content[1]["input"] == {"skill": "release-notes", "args": ""}


def test_a_file_extension_or_part_of_a_word_is_not_a_skill_name() -> None:
    for question in ("summarise report.pdf please", "what about pdfs?", "pdf-tools is down"):
        reply = plan_reply(request([{"role": "user", "content": question}]))
        assert reply.stop_reason == "end_turn", question


def test_with_load_skill_it_calls_that_tool() -> None:
    system = "Skills available:\n  - pdf: Extract PDFs.\n"
    reply = plan_reply(
        request([{"role": "user", "content": "use pdf"}], tools=[LOAD_SKILL_TOOL], system=system)
    )
    assert reply.content[1]["name"] == "load_skill"
    assert reply.content[1]["input"] == {"name": "pdf"}


def test_after_a_skill_with_a_bash_block_loads_it_runs_the_first_command() -> None:
    messages = [
        {"role": "user", "content": "use release-notes"},
        skill_call_turn("release-notes"),
        loaded_turn("release-notes", BODY_WITH_BASH),
    ]
    reply = plan_reply(request(messages))
    assert reply.stop_reason == "tool_use"
    tool = reply.content[1]
    assert tool["name"] == "Bash"
    assert tool["input"]["command"] == "git log --oneline \\\nv1.0..HEAD"
    assert "release-notes" in tool["input"]["description"]


def test_after_a_skill_loads_without_bash_it_says_so_without_quoting_the_hidden_body() -> None:
    messages = [
        {"role": "user", "content": "use pdf"},
        skill_call_turn("pdf"),
        loaded_turn("pdf", BODY_PLAIN),
    ]
    reply = plan_reply(request(messages))
    text = text_of(reply.content)
    assert reply.stop_reason == "end_turn"
    assert 'The "pdf" skill is loaded:' in text
    assert "Read the file with the Read tool first." not in text
    assert "Then summarise each page." not in text
    assert "ANTHROPIC_API_KEY" in text


def test_a_bash_block_is_not_run_when_bash_is_not_offered() -> None:
    messages = [
        {"role": "user", "content": "x"},
        skill_call_turn("release-notes"),
        loaded_turn("release-notes", BODY_WITH_BASH),
    ]
    reply = plan_reply(request(messages, tools=[SKILL_TOOL]))
    assert reply.stop_reason == "end_turn"
    assert "> Collect the commits since the last tag." not in text_of(reply.content)


def test_a_slash_command_delivery_counts_as_a_loaded_skill() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": '<command-message>The "pdf" skill is loading</command-message>\n<command-name>pdf</command-name>',
                },
                {"type": "text", "text": BODY_PLAIN},
            ],
        }
    ]
    reply = plan_reply(request(messages))
    assert 'The "pdf" skill is loaded:' in text_of(reply.content)


def test_a_load_skill_tool_result_counts_as_a_loaded_skill() -> None:
    messages = [
        {"role": "user", "content": "use pdf"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "load_skill", "input": {"name": "pdf"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": '<skill name="pdf">\nOpen the PDF first.\n</skill>',
                }
            ],
        },
    ]
    reply = plan_reply(request(messages, tools=[LOAD_SKILL_TOOL]))
    text = text_of(reply.content)
    assert 'The "pdf" skill is loaded:' in text
    assert "> Open the PDF first." not in text


def test_with_the_s05_designs_tools_it_runs_the_command_with_bash() -> None:
    """tool-result "as the source design" offers s05's `bash` (command only), not `Bash`."""
    design_bash = {**BASH_TOOL, "name": "bash"}
    messages = [
        {"role": "user", "content": "notes"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "load_skill", "input": {"name": "r"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": f'<skill name="r">\n{BODY_WITH_BASH}\n</skill>',
                }
            ],
        },
    ]
    reply = plan_reply(request(messages, tools=[design_bash, LOAD_SKILL_TOOL]))
    tool = reply.content[-1]
    assert tool["name"] == "bash" and set(tool["input"]) == {"command"}
    assert tool["input"]["command"].startswith("git log --oneline")


def test_after_a_bash_result_it_reports_the_first_lines() -> None:
    output = "\n".join(f"line {i}" for i in range(1, 13))
    messages = [
        {"role": "user", "content": "x"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "tb", "name": "Bash", "input": {"command": "ls"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tb",
                    "content": [{"type": "text", "text": output}],
                }
            ],
        },
    ]
    reply = plan_reply(request(messages))
    text = text_of(reply.content)
    assert reply.stop_reason == "end_turn"
    assert "`Bash` call finished" in text
    assert "line 1\n" in text and "line 8\n" in text
    assert "line 9" not in text
    assert "4 more lines" in text


def test_after_a_failed_tool_it_says_why_and_stops() -> None:
    messages = [
        {"role": "user", "content": "use pdf"},
        skill_call_turn("pdf"),
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_s",
                    "is_error": True,
                    "content": "Error: skill not found",
                }
            ],
        },
    ]
    reply = plan_reply(request(messages))
    text = text_of(reply.content)
    assert reply.stop_reason == "end_turn"
    assert "`Skill` call failed: Error: skill not found" in text


def test_it_does_not_load_the_same_skill_the_same_way_twice_in_a_row() -> None:
    messages = [
        {"role": "user", "content": "use pdf"},
        skill_call_turn("pdf", args=""),
        loaded_turn("pdf", BODY_PLAIN),
        {"role": "assistant", "content": "Loaded."},
        {"role": "user", "content": "use pdf"},
    ]
    reply = plan_reply(request(messages))
    assert reply.stop_reason == "end_turn"
    assert "already loaded" in text_of(reply.content)
    messages[-1] = {"role": "user", "content": "use pdf on other.pdf"}
    assert plan_reply(request(messages)).stop_reason == "tool_use"


def test_it_is_a_pure_function_of_the_request() -> None:
    req = request([{"role": "user", "content": "use pdf on a.pdf"}])
    assert plan_reply(req) == plan_reply(req)
    other = request([{"role": "user", "content": "use pdf on b.pdf"}])
    assert plan_reply(req).content[1]["id"] != plan_reply(other).content[1]["id"]


def test_a_whole_demo_conversation_is_accepted_by_the_api_rules() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "use release-notes since v1"}]
    first = plan_reply(request(messages))
    messages.append({"role": "assistant", "content": list(first.content)})
    tool_id = first.content[1]["id"]
    messages.append(loaded_turn("release-notes", BODY_WITH_BASH, tool_id=tool_id))
    second = plan_reply(request(messages))
    messages.append({"role": "assistant", "content": list(second.content)})
    messages.append(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": second.content[1]["id"],
                    "content": "abc123 Fix bug",
                }
            ],
        }
    )
    third = plan_reply(request(messages))
    messages.append({"role": "assistant", "content": list(third.content)})
    body = {
        "model": "demo",
        "max_tokens": 100,
        "messages": messages,
        "tools": [SKILL_TOOL, BASH_TOOL],
    }
    assert validate_request(body) is None
    assert "abc123 Fix bug" in text_of(third.content)


async def test_it_streams_the_same_event_types_as_the_real_adapter() -> None:
    model = DemoModel(delay=0)
    events: list[ModelEvent] = [
        e async for e in model.stream(request([{"role": "user", "content": "use the pdf skill"}]))
    ]
    assert events[0] == BlockStarted(index=0, block_type="text")
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1
    assert "".join(d.text for d in deltas) == 'I\'ll use the "pdf" skill for this.'
    tool_start = next(
        e for e in events if isinstance(e, BlockStarted) and e.block_type == "tool_use"
    )
    assert tool_start.index == 1 and tool_start.tool_name == "Skill"
    assert tool_start.tool_use_id.startswith("toolu_demo_")
    done = [e for e in events if isinstance(e, BlockDone)]
    assert [d.index for d in done] == [0, 1]
    final = events[-1]
    assert isinstance(final, MessageDone)
    assert final.message["model"] == "demo"
    assert final.message["role"] == "assistant"
    assert final.message["stop_reason"] == "tool_use"
    assert final.message["content"] == [d.block for d in done]
    assert (
        final.message["usage"]["input_tokens"] > 0 and final.message["usage"]["output_tokens"] > 0
    )


def test_the_demo_model_describes_itself() -> None:
    model = DemoModel()
    assert (model.model, model.label, model.is_demo) == ("demo", "Demo model (offline)", True)
    assert model.delay > 0
