"""The fake server's request rules: what the real Messages API answers with 400 or 404.

Shape (roles, blocks, tool pairing), then the model (an unknown id is a 404 `not_found_error`),
then the settings that model rejects (thinking, effort, sampling, max_tokens), cache breakpoints
(at most 4, never on thinking blocks), and thinking replay (a thinking block must come back
exactly as the server issued it, and with thinking on a continued tool loop must start with
thinking: the block the server issued before those calls, and some thinking block even when it
issued none, as the API refuses a tool turn made without thinking).
"""

from __future__ import annotations

import threading
from typing import Any

from skills_app.core.caching import MAX_BREAKPOINTS
from skills_app.core.model_catalog import EFFORT_LEVELS, ModelInfo, get_model
from tests.support.fake_anthropic_media import validate_media

# Block types the real API accepts in request messages; anything else is rejected like the API does.
KNOWN_BLOCK_TYPES = frozenset(
    {
        "text",
        "image",
        "document",
        "search_result",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)


def count_breakpoints(request: dict[str, Any]) -> int:
    """How many `cache_control` markers a request body carries (tools, system, message blocks)."""
    count = sum(1 for tool in request.get("tools") or [] if "cache_control" in tool)
    system = request.get("system")
    if isinstance(system, list):
        count += sum(1 for block in system if isinstance(block, dict) and "cache_control" in block)
    for message in request.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict) and "cache_control" in b)
    return count


def _content_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def validate_request(body: Any) -> str | None:
    """Return the API-style reason this Messages request would be rejected, or None when valid."""
    if not isinstance(body, dict):
        return "Request body must be a JSON object."
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        return "max_tokens: must be a positive integer"
    reason = _validate_tools(body.get("tools"))
    if reason:
        return reason
    return _validate_messages(body["messages"])


def _validate_tools(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not tool.get("name"):
            return f"tools.{i}.name: Field required"
        if "type" not in tool and "input_schema" not in tool:
            return f"tools.{i}.input_schema: Field required"
        if tool["name"] in seen:
            return f"tools: Tool names must be unique. Duplicate name: {tool['name']!r}"
        seen.add(tool["name"])
    return None


def _validate_messages(messages: Any) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    previous_tool_use_ids: set[str] = set()
    last = len(messages) - 1
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i == 0 and role != "user":
            return 'messages: first message must use the "user" role'
        if i > 0 and role == messages[i - 1].get("role"):
            return (
                f'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row (messages.{i - 1} and messages.{i})'
            )
        content = message.get("content")
        if content is None:
            return f"messages.{i}.content: Field required"
        if content == [] or (content == "" and not (i == last and role == "assistant")):
            return (
                f"messages.{i}: all messages must have non-empty content except for "
                "the optional final assistant message"
            )
        blocks = _content_blocks(content)
        reason = _validate_blocks(i, role, blocks, previous_tool_use_ids)
        if reason:
            return reason
        if role == "user" and previous_tool_use_ids:
            answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            missing = sorted(previous_tool_use_ids - answered)
            if missing:
                return (
                    f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                    "corresponding `tool_result` block in the next message."
                )
        if role == "assistant":
            previous_tool_use_ids = {b["id"] for b in blocks if b.get("type") == "tool_use"}
            if i == last and blocks and blocks[-1].get("type") == "text":
                text = blocks[-1].get("text", "")
                if text != text.rstrip():
                    return "messages: final assistant content cannot end with trailing whitespace"
        else:
            previous_tool_use_ids = set()
    # A trailing assistant tool_use has no user message after it to answer it.
    if messages[last].get("role") == "assistant" and previous_tool_use_ids:
        return (
            f"messages.{last}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: {', '.join(sorted(previous_tool_use_ids))}. Each `tool_use` block must have a "
            "corresponding `tool_result` block in the next message."
        )
    return None


def _validate_blocks(
    i: int, role: str, blocks: list[Any], previous_tool_use_ids: set[str]
) -> str | None:
    seen_other = False
    for j, block in enumerate(blocks):
        where = f"messages.{i}.content.{j}"
        if not isinstance(block, dict) or block.get("type") not in KNOWN_BLOCK_TYPES:
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            return (
                f"{where}.type: Input tag {kind!r} found using 'type' does not match any of "
                f"the expected tags: {', '.join(sorted(KNOWN_BLOCK_TYPES))}"
            )
        kind = block["type"]
        if kind == "text" and block.get("text", "") == "":
            return f"{where}: text content blocks must be non-empty"
        if kind in ("image", "document"):
            reason = validate_media(where, block)
            if reason:
                return reason
        if kind == "tool_use" and role != "assistant":
            return f"{where}: `tool_use` blocks can only appear in assistant messages"
        if kind == "tool_result":
            if role != "user":
                return f"{where}: `tool_result` blocks can only appear in user messages"
            if seen_other:
                return (
                    f"{where}: `tool_result` blocks must come first in the user message content, "
                    "before any text or other blocks"
                )
            if block.get("tool_use_id") not in previous_tool_use_ids:
                return (
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: "
                    f"{block.get('tool_use_id')}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message."
                )
            for k, inner in enumerate(_content_blocks(block.get("content", []))):
                if inner.get("type") == "text" and inner.get("text", "") == "":
                    return f"{where}.content.{k}: text content blocks must be non-empty"
        else:
            seen_other = True
    return None


def model_info(body: dict[str, Any]) -> ModelInfo | None:
    """The requested model's facts; None means the API would answer 404."""
    return get_model(str(body.get("model", "")))


def not_found_message(body: dict[str, Any]) -> str:
    """The API's 404 message for an unknown model id."""
    return f"model: {body.get('model')}"


def thinking_on(body: dict[str, Any], info: ModelInfo) -> bool:
    """Whether this request runs with thinking (explicitly, or by the model's default)."""
    config = body.get("thinking")
    if not isinstance(config, dict):
        return info.thinks_by_default
    return config.get("type") in ("adaptive", "enabled")


def thinking_display(body: dict[str, Any], info: ModelInfo) -> str:
    """ "summarized" or "omitted": whether thinking text is returned."""
    config = body.get("thinking")
    if isinstance(config, dict) and config.get("display") in ("summarized", "omitted"):
        return str(config["display"])
    return "summarized" if info.summarizes_by_default else "omitted"


def validate_settings(body: dict[str, Any], info: ModelInfo) -> str | None:
    """Why this model rejects the request's settings, or None."""
    model = info.id
    max_tokens = body["max_tokens"]
    if max_tokens > info.max_output:
        return (
            f"max_tokens: {max_tokens} > {info.max_output}, which is the maximum allowed number "
            f"of output tokens for {model}"
        )
    reason = _validate_thinking(body.get("thinking"), info, max_tokens)
    if reason:
        return reason
    config = body.get("output_config")
    if isinstance(config, dict) and "effort" in config:
        effort = config["effort"]
        if not info.efforts:
            return (
                f"output_config.effort: this model ({model}) does not support the effort parameter"
            )
        if effort not in EFFORT_LEVELS:
            return f"output_config.effort: Input should be one of {', '.join(EFFORT_LEVELS)}"
        if effort not in info.efforts:
            return f"output_config.effort: {effort!r} is not supported by {model}"
    sampling = [key for key in ("temperature", "top_p", "top_k") if key in body]
    if sampling and not info.sampling:
        return f"{sampling[0]}: sampling parameters are not supported by {model}; remove them"
    if "temperature" in body and "top_p" in body:
        return "temperature and top_p cannot both be specified for this model; use only one"
    if "temperature" in body and thinking_on(body, info) and body["temperature"] != 1:
        return "temperature may only be set to 1 when thinking is enabled"
    return None


def _validate_thinking(config: Any, info: ModelInfo, max_tokens: int) -> str | None:
    if config is None:
        return None
    kind = config.get("type") if isinstance(config, dict) else None
    model = info.id
    if kind == "adaptive":
        if not info.adaptive_thinking:
            return f"thinking.type: adaptive thinking is not supported by {model}"
    elif kind == "enabled":
        if not info.budget_thinking:
            return (
                f"thinking.type.enabled is not supported for {model}: use "
                '{"type": "adaptive"} with output_config.effort instead of budget_tokens'
            )
        budget = config.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        if budget >= max_tokens:
            return "max_tokens must be greater than thinking.budget_tokens"
    elif kind == "disabled":
        if not info.can_disable_thinking:
            return f"thinking.type.disabled is not supported for {model}; omit `thinking` instead"
    else:
        return "thinking.type: Input should be 'adaptive', 'enabled' or 'disabled'"
    if "display" in config and config["display"] not in ("summarized", "omitted"):
        return "thinking.display: Input should be 'summarized' or 'omitted'"
    return None


def validate_cache_control(body: dict[str, Any]) -> str | None:
    """At most 4 breakpoints, of type "ephemeral", and none on a thinking block."""
    count = count_breakpoints(body)
    if count > MAX_BREAKPOINTS:
        return (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {count}."
        )
    for i, message in enumerate(body.get("messages") or []):
        for j, block in enumerate(_content_blocks(message.get("content"))):
            marker = block.get("cache_control") if isinstance(block, dict) else None
            if marker is None:
                continue
            if block.get("type") in ("thinking", "redacted_thinking"):
                return (
                    f"messages.{i}.content.{j}.{block['type']}.cache_control: Thinking blocks "
                    "cannot be marked with cache_control directly"
                )
            if not isinstance(marker, dict) or marker.get("type") != "ephemeral":
                return f"messages.{i}.content.{j}.cache_control.type: Input should be 'ephemeral'"
    return None


class ThinkingLedger:
    """The thinking the server issued: signature -> text, and tool_use id -> its thinking block."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._signed: dict[str, str] = {}
        self._redacted: set[str] = set()
        self._by_tool_use: dict[str, dict[str, Any]] = {}

    def issue(self, content: list[dict[str, Any]]) -> None:
        """Remember the thinking blocks of a reply, and which tool calls they preceded."""
        first_thinking: dict[str, Any] | None = None
        with self._lock:
            for block in content:
                if block["type"] == "thinking":
                    self._signed[block["signature"]] = block["thinking"]
                    first_thinking = first_thinking or block
                elif block["type"] == "redacted_thinking":
                    self._redacted.add(block["data"])
                    first_thinking = first_thinking or block
                elif block["type"] == "tool_use" and first_thinking is not None:
                    self._by_tool_use[block["id"]] = first_thinking

    def check_replay(self, body: dict[str, Any], *, thinking: bool) -> str | None:
        """Why the thinking blocks sent back would be rejected, or None."""
        messages = body.get("messages") or []
        with self._lock:
            for i, message in enumerate(messages):
                for j, block in enumerate(_content_blocks(message.get("content"))):
                    where = f"messages.{i}.content.{j}"
                    if block.get("type") == "thinking":
                        if self._signed.get(block.get("signature", "")) != block.get("thinking"):
                            return f"{where}: Invalid `signature` in `thinking` block"
                    elif (
                        block.get("type") == "redacted_thinking"
                        and block.get("data") not in self._redacted
                    ):
                        return f"{where}: Invalid `data` in `redacted_thinking` block"
            if thinking:
                return self._check_tool_loop(messages)
        return None

    def _check_tool_loop(self, messages: list[Any]) -> str | None:
        # A continued tool loop: the last message answers the tool calls of the one before it
        # (with or without more content after the results). With thinking on, the API wants
        # that assistant message to start with thinking, whoever wrote it: a turn made without
        # thinking (thinking off then, or another key's session) cannot be continued with it on.
        if len(messages) < 2 or messages[-1].get("role") != "user":
            return None
        results = [
            b
            for b in _content_blocks(messages[-1].get("content"))
            if b.get("type") == "tool_result"
        ]
        assistant = _content_blocks(messages[-2].get("content"))
        if not results or messages[-2].get("role") != "assistant":
            return None
        where = f"messages.{len(messages) - 2}.content.0.type"
        first = assistant[0] if assistant else {}
        if first.get("type") not in ("thinking", "redacted_thinking"):
            return (
                f"{where}: Expected `thinking` or `redacted_thinking`, but found "
                f"`{first.get('type', 'nothing')}`. When `thinking` is enabled, a final "
                "`assistant` message must start with a thinking block (preceding the lastmost "
                "set of `tool_use` and `tool_result` blocks). We recommend you include thinking "
                "blocks from previous turns. To avoid this requirement, disable `thinking`."
            )
        issued = next(
            (
                self._by_tool_use[b["id"]]
                for b in assistant
                if b.get("type") == "tool_use" and b.get("id") in self._by_tool_use
            ),
            None,
        )
        if issued is not None and first != issued:
            return (
                f"{where}: Expected `thinking` or `redacted_thinking`, but found "
                f"`{first.get('type', 'nothing')}`. When thinking is enabled, the final "
                "assistant message must start with the thinking block that preceded its tool "
                "calls, unchanged. Send the thinking blocks back as you received them."
            )
        return None
