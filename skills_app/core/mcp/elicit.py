"""What Skillscope answers a server that asks the person for input mid-call (`elicitation/create`).

A call made with an `Asker` (the run's way of asking its person, passed down by the runs side)
asks the person a form-mode question whose fields are all flat primitives (string, number,
integer, boolean, or an enum of strings): `question_for` turns the requested schema into
`FormField`s, the person accepts (the values, checked against the schema by `checked_values`),
declines or cancels, and the server gets that answer. Every other request is declined. Either
way the call's result carries one visible line that names the server and says what it asked and
what it got (`ElicitNote`). A request that looks like it wants a secret (a field named or
described as a password, token, secret, API key or credential, a `password` format, or a
`writeOnly` field; and every URL-mode request, which exists for credentials and payments) is
declined without asking, with a note that says so: a form here never asks for secrets.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
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
    # What the person answered when they were asked ("" when nobody was asked): accept,
    # decline or cancel; `why` says why a cancel happened (no answer in time, the run stopped).
    answered: str = ""
    why: str = ""

    def text(self) -> str:
        asked = self.message.strip() or "(no message)"
        if self.answered == "accept":
            return (
                f'[The MCP server "{self.server}" asked for input: {asked} The person accepted '
                "and sent their answer.]"
            )
        if self.answered == "decline":
            return f'[The MCP server "{self.server}" asked for input: {asked} The person declined.]'
        if self.answered == "cancel":
            why = f" ({self.why})" if self.why else ""
            return (
                f'[The MCP server "{self.server}" asked for input: {asked} Cancelled{why}: '
                "no answer was sent.]"
            )
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


# --- asking the person --------------------------------------------------------------------------

KINDS = ("string", "number", "integer", "boolean")


@dataclass(frozen=True, slots=True)
class FormField:
    """One flat field of a server's question: a text, a number, a yes/no, or a choice."""

    name: str
    kind: str  # string | number | integer | boolean
    title: str = ""
    description: str = ""
    required: bool = False
    options: tuple[str, ...] = ()  # an enum: the choices, shown as a select
    default: str = ""


@dataclass(frozen=True, slots=True)
class ElicitQuestion:
    """A server's question as the person is asked it: who asks, what, and the form."""

    server: str
    message: str
    fields: tuple[FormField, ...]
    # Why it is not put to the person ("" when it is): the person is shown that the server
    # asked and that it was declined, and no answer of theirs is waited for.
    refused: str = ""


@dataclass(frozen=True, slots=True)
class ElicitAnswer:
    """The person's answer: accept (with `content`, checked), decline, or cancel (`why`)."""

    action: str  # accept | decline | cancel
    content: Mapping[str, str | int | float | bool] | None = None
    why: str = ""


# The run's way of asking its person one question (the runs side; None: nobody can be asked).
Asker = Callable[[ElicitQuestion], Awaitable[ElicitAnswer]]


def form_fields(schema: Mapping[str, Any]) -> tuple[FormField, ...] | None:
    """The fields of a requested schema, or None when one is not a flat primitive (an object,
    an array, a union): such a question is not asked."""
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict):
        return None
    required = schema.get("required") or []
    required = set(required) if isinstance(required, list) else set()
    found: list[FormField] = []
    for name, field in properties.items():
        if not isinstance(field, dict):
            return None
        kind = field.get("type")
        options: tuple[str, ...] = ()
        enum = field.get("enum")
        if enum is None and isinstance(field.get("oneOf"), list):
            enum = [c.get("const") for c in field["oneOf"] if isinstance(c, dict)]
        if enum is not None:
            if not isinstance(enum, list) or not all(isinstance(v, str) for v in enum):
                return None
            options, kind = tuple(enum), "string"
        if kind not in KINDS:
            return None
        default = field.get("default")
        found.append(
            FormField(
                name=str(name),
                kind=str(kind),
                title=str(field.get("title") or ""),
                description=str(field.get("description") or ""),
                required=name in required,
                options=options,
                default="" if default is None else str(default),
            )
        )
    return tuple(found)


def question_for(server: str, params: Any) -> ElicitQuestion:
    """The question to ask the person; `refused` says why it may not be asked: URL mode, a
    field that looks like a secret, or a field that is not a flat primitive."""
    message = str(getattr(params, "message", "") or "")
    if getattr(params, "mode", "form") == "url":
        why = "it wanted the person to open a link, and Skillscope does not open a server's links"
        return ElicitQuestion(server, message, (), refused=why)
    schema = getattr(params, "requested_schema", None)
    schema = schema if isinstance(schema, dict) else {}
    secret = secret_field(schema)
    if secret:
        why = (
            f'its field "{secret}" looks like a secret, and Skillscope never asks for secrets '
            "in a form"
        )
        return ElicitQuestion(server, message, (), refused=why)
    fields = form_fields(schema)
    if fields is None:
        why = "its form has a field this chat cannot show (only text, numbers, yes/no, choices)"
        return ElicitQuestion(server, message, (), refused=why)
    return ElicitQuestion(server, message, fields)


def checked_values(
    fields: tuple[FormField, ...], raw: Mapping[str, Any]
) -> dict[str, str | int | float | bool]:
    """The person's answers (form text, or JSON values) as the schema's types; ValueError
    naming the field when one is missing, unknown or of the wrong kind."""
    known = {f.name for f in fields}
    unknown = [str(k) for k in raw if k not in known]
    if unknown:
        raise ValueError(f"Unknown field {unknown[0]!r}.")
    values: dict[str, str | int | float | bool] = {}
    for field in fields:
        value = raw.get(field.name)
        label = field.title or field.name
        if value is None or value == "":
            if field.kind == "boolean":
                values[field.name] = False  # a box left unticked sends nothing
                continue
            if field.required:
                raise ValueError(f'"{label}" is required.')
            continue
        text = str(value).strip() if not isinstance(value, bool) else value
        if field.kind == "boolean":
            if isinstance(text, bool):
                values[field.name] = text
            elif text.lower() in ("true", "on", "yes", "1"):
                values[field.name] = True
            elif text.lower() in ("false", "off", "no", "0"):
                values[field.name] = False
            else:
                raise ValueError(f'"{label}" must be yes or no.')
        elif field.kind == "integer":
            try:
                values[field.name] = int(str(text))
            except ValueError:
                raise ValueError(f'"{label}" must be a whole number.') from None
        elif field.kind == "number":
            try:
                number = float(str(text))
            except ValueError:
                raise ValueError(f'"{label}" must be a number.') from None
            if number != number or number in (float("inf"), float("-inf")):
                raise ValueError(f'"{label}" must be a number.')
            values[field.name] = number
        else:
            if field.options and str(text) not in field.options:
                raise ValueError(f'"{label}" must be one of: {", ".join(field.options)}.')
            values[field.name] = str(value)
    return values
