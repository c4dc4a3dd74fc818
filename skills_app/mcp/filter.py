"""What an MCP call may not carry out of Skillscope: the outbound half of the hidden-content filter.

An `mcp__` call goes to another system, so its arguments are checked after the rules allowed it
(or before anyone is asked) and refused, never sent, when they carry:

- hidden skill text of the conversation (`visibility.quotes_hidden`, the same check that refuses
  an approval quoting a skill's instructions, handed in by the run's factory since visibility
  sits above this layer; for every owner, an inspector included: what a person may read is not
  what may leave for a server);
- a stored secret of any registered server: a stdio server's env values, an HTTP server's header
  values (and each word of one, so the token of "Bearer <token>" counts; `core.mcp.secrets`),
  and every person's OAuth tokens (`oauth.token_values`);
- another person's words: a string sharing a long span with something another person sent
  (their messages and attached text files) and the caller did not (`skills_app.sent_texts`).

The refusal gives the reason and the call as the audit may keep it: secrets masked, another
person's words withheld.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skills_app.core.mcp.definitions import split_model_tool_name
from skills_app.core.mcp.secrets import mask, secret_words
from skills_app.core.permissions import ToolCall
from skills_app.mcp.oauth import token_values
from skills_app.models import McpServer
from skills_app.sent_texts import others_words, withhold

QUOTES_HIDDEN = (
    "this MCP call quotes hidden skill text, which never leaves for an MCP server; "
    "call the tool again without it"
)
CARRIES_SECRET = (
    "this MCP call carries a stored secret of an MCP server (an env or header value, or an "
    "OAuth token), which is never sent in a call's arguments"
)

QUOTES_OTHERS = (
    "this MCP call quotes what another person wrote or attached in Skillscope, which never "
    "leaves for an MCP server in your call; call the tool again without it"
)


def stored_secrets() -> tuple[str, ...]:
    """Every stored env and header value of the registered servers (and the words of each), and
    every stored OAuth token."""
    values: list[object] = []
    oauth_servers = False
    for env, headers, auth in McpServer.objects.values_list("env", "headers", "auth"):
        values += [*(env or {}).values(), *(headers or {}).values()]
        oauth_servers = oauth_servers or auth == "oauth"
    return secret_words([*values, *(token_values() if oauth_servers else [])])


def refusal(
    call: ToolCall, *, user_id: int, quotes_hidden: Callable[[dict[str, Any]], bool]
) -> tuple[str, ToolCall] | None:
    """Why this MCP call may not leave and the call as the audit keeps it; None: it may.

    `user_id`: whose call it is; `quotes_hidden(arguments)`: whether they hold hidden text of
    the call's conversation."""
    if split_model_tool_name(call.tool) is None:
        return None
    secrets = stored_secrets()
    masked = mask(dict(call.input), secrets)
    if masked != dict(call.input):
        return CARRIES_SECRET, ToolCall(call.tool, masked)
    if quotes_hidden(dict(call.input)):
        return QUOTES_HIDDEN, call
    quoting = others_words(user_id, call.input)
    if quoting:
        return QUOTES_OTHERS, ToolCall(call.tool, withhold(dict(call.input), quoting))
    return None
