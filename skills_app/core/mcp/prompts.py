"""An MCP server's prompts as the `/` menu offers them: `/mcp__server__prompt name=value ...`.

A prompt is listed by the server (`prompts/list`) with its arguments; the person invokes it by
its model-style name, giving arguments as `name=value` words (quoted as in a shell when a value
holds spaces) or, in their declared order, as plain words. A required argument left out is
refused before the server is asked, naming it. What `prompts/get` answers becomes the person's
turn: the text of its messages, in order (`prompt_text`).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from typing import Any

from skills_app.core.mcp.definitions import model_tool_name, split_model_tool_name

_INVOCATION = re.compile(r"/(mcp__\S+)(.*)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class PromptArgument:
    name: str
    description: str = ""
    required: bool = False


@dataclass(frozen=True, slots=True)
class PromptDefinition:
    """One prompt as its server lists it."""

    name: str
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()

    def as_stored(self) -> list[dict[str, Any]]:
        """The arguments as JSON (how a review shows them and the database keeps them)."""
        return [
            {"name": a.name, "description": a.description, "required": a.required}
            for a in self.arguments
        ]

    def content_hash(self) -> str:
        """sha256 over the name, description and arguments, as canonical JSON (marked as a
        prompt, so no tool's definition hashes the same): the identity a review approves."""
        canonical = json.dumps(
            {
                "kind": "prompt",
                "name": self.name,
                "description": self.description,
                "arguments": self.as_stored(),
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def hint(self) -> str:
        """The arguments as the `/` menu shows them: `topic=… [tone=…]`."""
        words = [f"{a.name}=…" if a.required else f"[{a.name}=…]" for a in self.arguments]
        return " ".join(words)


class PromptArgumentError(ValueError):
    """Arguments a prompt cannot be asked with; the message says which and how to write them."""


def prompt_from_sdk(prompt: Any) -> PromptDefinition:
    """The definition of an SDK `Prompt` (mcp_types)."""
    return PromptDefinition(
        name=str(prompt.name),
        description=str(prompt.description or ""),
        arguments=tuple(
            PromptArgument(str(a.name), str(a.description or ""), bool(a.required))
            for a in (prompt.arguments or ())
        ),
    )


def prompt_command(server: str, prompt: str) -> str | None:
    """`mcp__server__prompt`, or None when the name cannot be typed as one word."""
    return model_tool_name(server, prompt)


def split_invocation(text: str) -> tuple[str, str, str] | None:
    """(server, prompt, the rest) of `/mcp__server__prompt rest`, or None for any other text."""
    match = _INVOCATION.fullmatch(text.strip())
    if match is None:
        return None
    parts = split_model_tool_name(match.group(1))
    if parts is None:
        return None
    return parts[0], parts[1], match.group(2).strip()


def bind_arguments(definition: PromptDefinition, rest: str, command: str = "") -> dict[str, str]:
    """The arguments of one invocation, by name; PromptArgumentError when they do not fit.

    `command`: the prompt's name as typed (`mcp__server__prompt`), for the usage line."""
    usage = f"/{command or definition.name} {definition.hint()}".rstrip()
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise PromptArgumentError(
            f"The arguments could not be read ({exc}). Write: {usage}"
        ) from None
    known = {a.name for a in definition.arguments}
    given: dict[str, str] = {}
    positional: list[str] = []
    for word in words:
        name, sep, value = word.partition("=")
        if sep and name in known:
            given[name] = value
        else:
            positional.append(word)
    free = [a.name for a in definition.arguments if a.name not in given]
    if len(positional) > len(free):
        extra = " ".join(positional[len(free) :])
        raise PromptArgumentError(
            f'The prompt "{definition.name}" takes no more arguments than '
            f"{', '.join(known) or 'none'}; left over: {extra!r}."
        )
    given.update(zip(free, positional, strict=False))
    missing = [a.name for a in definition.arguments if a.required and a.name not in given]
    if missing:
        which = ", ".join(missing)
        raise PromptArgumentError(
            f'The prompt "{definition.name}" needs the argument{"s" if len(missing) > 1 else ""} '
            f"{which}. Write: {usage}"
        )
    return given


def prompt_text(result: Any) -> str:
    """The text of a `prompts/get` answer's messages; an assistant's message is labelled so,
    content other than text is named, not inlined."""
    from mcp import types as mcp_types

    parts: list[str] = []
    for message in result.messages:
        block = message.content
        if isinstance(block, mcp_types.TextContent):
            text = block.text
        elif isinstance(block, mcp_types.EmbeddedResource):
            inner = getattr(block.resource, "text", None)
            text = inner if isinstance(inner, str) else f"[resource: {block.resource.uri}]"
        elif isinstance(block, mcp_types.ResourceLink):
            text = f"[resource link: {block.uri}]"
        else:
            text = f"[{getattr(block, 'type', 'content')} not shown]"
        if message.role == "assistant":
            text = f"(As the assistant:) {text}"
        parts.append(text)
    return "\n\n".join(parts)
