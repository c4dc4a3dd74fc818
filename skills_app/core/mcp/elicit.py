"""What Skillscope answers a server that asks the person for input mid-call (`elicitation/create`).

The chat has no form for a server's question yet, so every request is declined, and the call's
result carries one visible line that names the server and says what it asked (`ElicitNote`): the
person and the model both see that the server wanted input and got none. A request that looks
like it wants a secret (a field named or described as a password, token, secret, API key or
credential, a `password` format, or a `writeOnly` field; and every URL-mode request, which
exists for credentials and payments) is declined with a note that says so: a form here never
asks for secrets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_SECRET_WORDS = re.compile(
    r"pass(word|phrase|code)?\b|passwd|\bpin\b|token|secret|api[\s_-]?key|apikey|credential"
    r"|private[\s_-]?key|\botp\b|\bcvv\b|card[\s_-]?number",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class ElicitNote:
    """One request a server made during a call, and what was answered."""

    server: str
    message: str
    fields: tuple[str, ...]
    secret_field: str  # "" when nothing in it looked like a secret
    url: str = ""

    def text(self) -> str:
        asked = self.message.strip() or "(no message)"
        if self.url:
            return (
                f'[The MCP server "{self.server}" asked for input: {asked} (it wanted the person '
                f"to open {self.url}). Declined: Skillscope does not open a server's links.]"
            )
        if self.secret_field:
            return (
                f'[The MCP server "{self.server}" asked for input: {asked} Declined: its field '
                f'"{self.secret_field}" looks like a secret, and Skillscope never asks for '
                "secrets in a form.]"
            )
        fields = f" (fields: {', '.join(self.fields)})" if self.fields else ""
        return (
            f'[The MCP server "{self.server}" asked for input: {asked}{fields}. Declined: '
            "answering a server's questions in the chat is not available yet.]"
        )


def secret_field(schema: dict[str, Any]) -> str:
    """The first field of a requested schema that looks like a secret, or ""."""
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict):
        return ""
    for name, field in properties.items():
        field = field if isinstance(field, dict) else {}
        if field.get("writeOnly") or str(field.get("format", "")).lower() == "password":
            return str(name)
        words = " ".join(str(field.get(k, "")) for k in ("title", "description"))
        if _SECRET_WORDS.search(str(name)) or _SECRET_WORDS.search(words):
            return str(name)
    return ""


def note_for(server: str, params: Any) -> ElicitNote:
    """The note of one request (SDK `ElicitRequestParams`, form or URL mode)."""
    message = str(getattr(params, "message", "") or "")
    if getattr(params, "mode", "form") == "url":
        return ElicitNote(server, message, (), "", url=str(getattr(params, "url", "")))
    schema = getattr(params, "requested_schema", None)
    schema = schema if isinstance(schema, dict) else {}
    properties = schema.get("properties") or {}
    fields = tuple(str(n) for n in properties) if isinstance(properties, dict) else ()
    return ElicitNote(server, message, fields, secret_field(schema))
