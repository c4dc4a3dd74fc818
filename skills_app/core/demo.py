"""The offline demo model: a deterministic stand-in for Claude that shows how skills load."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from skills_app.core import skill_choice
from skills_app.core.attachments import ATTACHED_HEADER, paths_in_note
from skills_app.core.events import BlockDone, BlockStarted, MessageDone, ModelEvent, TextDelta
from skills_app.core.llm import ModelRequest
from skills_app.core.model_catalog import DEMO_MODEL_ID
from skills_app.core.skill_choice import CatalogEntry
from skills_app.core.summary import SUMMARY_SYSTEM, demo_summary
from skills_app.core.transcript import result_text, text_of

BASE_DIR_PREFIX = "Base directory for this skill:"
LAUNCHING_PREFIX = "Launching skill:"
CHUNK_CHARS = 12  # small enough that the browser visibly streams

_BASH_FENCE = re.compile(r"```(?:bash|sh|shell)[^\n]*\n(?P<code>.*?)```", re.DOTALL)
_SKILL_XML = re.compile(r'<skill name="(?P<name>[^"]+)">(?P<body>.*?)(?:</skill>|$)', re.DOTALL)
_COMMAND_NAME = re.compile(r"<command-name>/?(?P<name>[^<]+)</command-name>")
_TOOLSET_LOADED = re.compile(r'^Loaded the skill "(?P<name>[^"]+)"')
_LOADED_XML = re.compile(
    r'<loaded_skill name="(?P<name>[^"]+)">\n(?P<body>.*?)\n</loaded_skill>', re.DOTALL
)


@dataclass(frozen=True, slots=True)
class DemoReply:
    """What the demo model decided to answer: content blocks and the stop reason."""

    content: tuple[dict[str, Any], ...]
    stop_reason: str


def read_catalog(request: ModelRequest) -> list[CatalogEntry]:
    """The skills listed in the Skill tool description, or under "Skills available:" in the system prompt."""
    return skill_choice.read_catalog(request.system, request.tools)


def plan_reply(request: ModelRequest) -> DemoReply:
    """Decide the demo answer from the request alone (a pure function of it)."""
    if request.system == SUMMARY_SYSTEM:
        return _text(demo_summary(request))
    catalog = read_catalog(request)
    messages = request.messages
    if not messages or messages[-1].get("role") != "user":
        return _text(_intro(catalog, ""))
    blocks = _blocks(messages[-1].get("content"))
    loaded = _loaded_skill(blocks) or _toolset_loaded(request, blocks)
    if loaded is not None:
        return _after_skill_load(request, loaded[0], loaded[1])
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        return _after_tool_result(messages, results[0])
    question = text_of(
        b for b in blocks if not str(b.get("text", "")).startswith(ATTACHED_HEADER)
    ).strip()
    return _answer_user(request, catalog, question)


class DemoModel:
    """Implements ModelClient offline; streams like the real adapter, with the same event types."""

    # Its id is what pricing recognises as free ("no cost").
    model = DEMO_MODEL_ID
    label = "Demo model (offline)"
    is_demo = True

    def __init__(self, *, delay: float = 0.02) -> None:
        self.delay = delay

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream the planned reply in small chunks."""
        reply = plan_reply(request)
        for index, block in enumerate(reply.content):
            if block["type"] == "text":
                yield BlockStarted(index=index, block_type="text")
                text = block["text"]
                for start in range(0, len(text), CHUNK_CHARS):
                    await asyncio.sleep(self.delay)
                    yield TextDelta(index=index, text=text[start : start + CHUNK_CHARS])
            else:
                await asyncio.sleep(self.delay)
                yield BlockStarted(
                    index=index,
                    block_type="tool_use",
                    tool_name=block["name"],
                    tool_use_id=block["id"],
                )
            yield BlockDone(index=index, block=block)
        output_chars = sum(len(json.dumps(b)) for b in reply.content)
        yield MessageDone(
            message={
                "id": f"msg_demo_{_digest(request)[:20]}",
                "model": self.model,
                "role": "assistant",
                "content": list(reply.content),
                "stop_reason": reply.stop_reason,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": max(1, _request_chars(request) // 4),
                    "output_tokens": max(1, output_chars // 4),
                },
            }
        )


def _digest(request: ModelRequest) -> str:
    payload = json.dumps([request.system, request.messages], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def _request_chars(request: ModelRequest) -> int:
    return len(json.dumps([request.system, request.tools, request.messages], default=str))


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _text(text: str) -> DemoReply:
    return DemoReply(content=({"type": "text", "text": text},), stop_reason="end_turn")


def _tool_call(
    request: ModelRequest, text: str, name: str, tool_input: dict[str, Any]
) -> DemoReply:
    tool_id = f"toolu_demo_{_digest(request)[:20]}"
    return DemoReply(
        content=(
            {"type": "text", "text": text},
            {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input},
        ),
        stop_reason="tool_use",
    )


def _loaded_skill(blocks: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(skill name, injected body) when this user turn delivers a skill, else None."""
    name = ""
    body: str | None = None
    launched = False
    for block in blocks:
        if block.get("type") == "tool_result" and not block.get("is_error"):
            text = result_text(block)
            if text.startswith(LAUNCHING_PREFIX):
                name, launched = text[len(LAUNCHING_PREFIX) :].strip(), True
            elif match := _SKILL_XML.search(text):
                name, body = match["name"], match["body"].strip()
        elif block.get("type") == "text":
            text = block.get("text", "")
            if match := _COMMAND_NAME.search(text):
                name = name or match["name"].strip()
            if text.startswith(BASE_DIR_PREFIX):
                first, _, rest = text.partition("\n")
                body = rest.strip()
                if not name:
                    name = first[len(BASE_DIR_PREFIX) :].strip().rstrip("/").rsplit("/", 1)[-1]
    # A status line alone (a failed slash command) delivered nothing, so nothing is loaded.
    if body is None and not launched:
        return None
    return name or "unnamed", body or ""


def _toolset_loaded(request: ModelRequest, blocks: list[dict[str, Any]]) -> tuple[str, str] | None:
    """The toolset profile: the body sits in the system prompt, the turn only names the skill."""
    name = ""
    for block in blocks:
        if block.get("type") == "tool_result" and not block.get("is_error"):
            if match := _TOOLSET_LOADED.match(result_text(block)):
                name = match["name"]
        elif block.get("type") == "text" and (match := _COMMAND_NAME.search(block.get("text", ""))):
            name = name or match["name"].strip()
    if not name:
        return None
    for match in _LOADED_XML.finditer(request.system):
        if match["name"] == name:
            return name, match["body"]
    return None


def _first_command(body: str) -> str | None:
    match = _BASH_FENCE.search(body)
    if match is None:
        return None
    lines: list[str] = []
    for line in match["code"].splitlines():
        stripped = line.strip()
        if not lines and (not stripped or stripped.startswith("#")):
            continue
        lines.append(stripped)
        # A trailing backslash continues the command on the next line.
        if not stripped.endswith("\\"):
            break
    return "\n".join(lines) or None


def _previous_tool_uses(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if len(messages) < 2 or messages[-2].get("role") != "assistant":
        return []
    return [b for b in _blocks(messages[-2].get("content")) if b.get("type") == "tool_use"]


def attached_paths(messages: list[dict[str, Any]]) -> list[str]:
    """Workspace paths of the files the user attached so far, oldest first."""
    paths: list[str] = []
    for message in messages:
        if message.get("role") != "user":
            continue
        for block in _blocks(message.get("content")):
            if block.get("type") == "text":
                paths.extend(paths_in_note(block.get("text", "")))
    return paths


_FILE_TOKEN = re.compile(r"(?<![\w/.$-])[\w][\w./-]*\.(?P<ext>[A-Za-z0-9]{1,8})(?![\w/.-])")


def use_attachments(command: str, paths: list[str]) -> str:
    """The command with example file names (input.pdf) replaced by the attached file of that kind.

    A skill's example says `pdftotext input.pdf out.txt`; with report.pdf attached, the demo runs
    `pdftotext in/report.pdf out.txt`. Names of another kind, and paths under out/ or work/ (what
    the command writes) are left alone.
    """
    by_ext: dict[str, str] = {}
    for path in paths:  # the newest attachment of a kind wins
        by_ext[path.rsplit(".", 1)[-1].lower()] = path
    used: set[str] = set()

    def swap(match: re.Match[str]) -> str:
        token, ext = match[0], match["ext"].lower()
        target = by_ext.get(ext)
        if target is None or token in paths or token.startswith(("out/", "work/")):
            return token
        if ext in used:
            return token  # only the first input of a kind: a second one is usually the output
        used.add(ext)
        return target

    return _FILE_TOKEN.sub(swap, command)


def _after_skill_load(request: ModelRequest, name: str, body: str) -> DemoReply:
    command = _first_command(body)
    paths = attached_paths(request.messages)
    if command and paths:
        command = use_attachments(command, paths)
    names = {tool.get("name") for tool in request.tools}
    # Skillscope's Bash, or the s05 design's own `bash` (tool-result as the source design).
    shells = [n for n in ("skill_run", "Bash", "bash") if n in names]
    runner = shells[0] if shells else None
    already_ran = any(
        use.get("name") == runner and use.get("input", {}).get("command") == command
        for use in _previous_tool_uses(request.messages)
    )
    if command and runner and not already_ran:
        tool_input: dict[str, Any] = {"command": command}
        if runner == "skill_run":
            tool_input = {"skill": name, "command": command, "output_files": ["out/*"]}
        elif runner == "Bash":
            tool_input["description"] = f'First command from the "{name}" skill'
        return _tool_call(
            request,
            f'The "{name}" skill is loaded. I\'ll run the first command it gives.',
            runner,
            tool_input,
        )
    # Never quote the body: it is hidden from the user, and the demo must not leak it.
    lines = len([line for line in body.splitlines() if line.strip()])
    return _text(
        f'The "{name}" skill is loaded: its instructions ({lines} lines) reached me as a '
        "hidden message that the transcript does not show you.\n\n"
        "I'm the offline demo model, so I can't follow them myself. "
        "A real Claude model (set ANTHROPIC_API_KEY) would now follow these instructions."
    )


def _after_tool_result(messages: list[dict[str, Any]], result: dict[str, Any]) -> DemoReply:
    tool_name = next(
        (
            use.get("name", "tool")
            for use in _previous_tool_uses(messages)
            if use.get("id") == result.get("tool_use_id")
        ),
        "tool",
    )
    output = result_text(result).strip()
    lines = output.splitlines()
    if result.get("is_error"):
        reason = lines[0] if lines else "no reason was given"
        return _text(
            f"The `{tool_name}` call failed: {reason}\n\n"
            "I'm the offline demo model, so I'll stop here instead of retrying."
        )
    if not lines:
        return _text(f"The `{tool_name}` call finished and produced no output.")
    shown = "\n".join(lines[:8])
    more = f"\n\n({len(lines) - 8} more lines not shown.)" if len(lines) > 8 else ""
    fence = "````" if "```" in shown else "```"
    return _text(
        f"The `{tool_name}` call finished. The first lines of its output:\n\n"
        f"{fence}\n{shown}\n{fence}{more}"
    )


def _answer_user(request: ModelRequest, catalog: list[CatalogEntry], question: str) -> DemoReply:
    # The skill is chosen by the documented rule of `skill_choice` (named, else word overlap).
    choice = skill_choice.choose_skill(question, catalog)
    if choice is None or not skill_choice.can_load(request.tools):
        return _text(_intro(catalog, question))
    name = choice.entry.name
    tool_name, tool_input = skill_choice.loader_call(request.tools, name, choice.args)
    if _last_skill_call(request.messages) == (tool_name, tool_input):
        return _text(
            f'The "{name}" skill is already loaded above with the same arguments, '
            "so I won't load it again. I'm the offline demo model; a real Claude model "
            "(set ANTHROPIC_API_KEY) would now follow its instructions."
        )
    return _tool_call(request, f'I\'ll use the "{name}" skill for this.', tool_name, tool_input)


def _last_skill_call(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    for message in reversed(messages):
        if message.get("role") != "assistant":
            continue
        for block in reversed(_blocks(message.get("content"))):
            if block.get("type") == "tool_use" and block.get("name") in skill_choice.LOADERS:
                return block["name"], block.get("input", {})
    return None


def _intro(catalog: list[CatalogEntry], question: str) -> str:
    parts = [
        "I'm the **offline demo model**, not Claude: no `ANTHROPIC_API_KEY` is set, so I can "
        "only show how skills load and run, not really answer."
    ]
    if question:
        summary = " ".join(question.split())
        if len(summary) > 120:
            summary = summary[:117].rstrip() + "..."
        parts.append(f"You asked: “{summary}”")
    if catalog:
        listing = "\n".join(f"- `{entry.name}`" for entry in catalog)
        example = catalog[0].name
        parts.append(f"Skills I can see:\n\n{listing}")
        parts.append(
            f"To try one, type `/{example}` (with optional arguments after it), or name it in "
            f"a message, for example “use the {example} skill”."
        )
    else:
        parts.append("I can't see any skills in this conversation.")
    return "\n\n".join(parts)
