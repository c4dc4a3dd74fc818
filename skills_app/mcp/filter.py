"""What an MCP call may not carry out of Skillscope: the outbound half of the hidden-content filter.

An `mcp__` call goes to another system, so its arguments are checked after the rules allowed it
(or before anyone is asked) and refused, never sent, when they carry:

- hidden skill text of the conversation (`visibility.quotes_hidden`, the same check that refuses
  an approval quoting a skill's instructions, handed in by the run's factory since visibility
  sits above this layer; for every owner, an inspector included: what a person may read is not
  what may leave for a server);
- a stored secret of any registered server: a stdio server's env values, an HTTP server's header
  values (and each word of one, so the token of "Bearer <token>" counts; `core.mcp.secrets`),
  and every person's OAuth tokens (`oauth_grants.tokens_in`);
- another person's words: a string sharing a long span with something another person sent
  (their messages and attached text files) and the caller did not (`skills_app.sent_texts`).

The refusal gives the reason and the call as the audit may keep it: secrets masked, another
person's words withheld.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from skills_app.core.mcp.definitions import split_model_tool_name
from skills_app.core.mcp.secrets import mask, secret_words
from skills_app.core.permissions import ToolCall
from skills_app.mcp.oauth_grants import tokens_in
from skills_app.models import McpOAuthGrant, McpServer
from skills_app.models.sealed import open_values, sealing_keys
from skills_app.models.statements import Statement
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
    every stored OAuth token.

    Read at every call, one query (two with OAuth servers): the rows as the database holds them
    (ciphertext, which differs at each save), opened again only when they differ from the rows
    the last words were made from, or when the keys that open them changed."""
    global _last
    servers = _SERVER_ROWS.rows()
    oauth_servers = any(auth == "oauth" for _env, _headers, auth in servers)
    grants = tuple(bytes(blob or b"") for (blob,) in _GRANT_ROWS.rows()) if oauth_servers else ()
    key = (servers, grants, sealing_keys())
    last = _last
    if last is not None and last[0] == key:
        return last[1]
    values: list[object] = []
    for env, headers, _auth in servers:
        values += [*_opened(env).values(), *_opened(headers).values()]
    words = secret_words([*values, *tokens_in(grants)])
    _last = (key, words)
    return words


def _opened(stored: object) -> dict[str, str]:
    """A `SealedValuesField` as the database hands it (JSON text of ciphertext), opened."""
    value = json.loads(stored) if isinstance(stored, str | bytes) else stored
    return open_values(value) if isinstance(value, dict) else {}


_SERVER_ROWS = Statement(
    lambda: McpServer.objects.order_by("pk").values_list("env", "headers", "auth")
)
_GRANT_ROWS = Statement(lambda: McpOAuthGrant.objects.order_by("pk").values_list("tokens"))
_last: tuple[tuple[object, ...], tuple[str, ...]] | None = None


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
