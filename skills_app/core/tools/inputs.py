"""Tool inputs checked against the tool's own `input_schema`, the one the model sees.

The schema is the single source of truth for what a tool accepts: the model is shown it, and
the same document rejects a bad call before the tool runs. Errors name the field and what was
expected, so the model can correct the call on its next try.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.exceptions import best_match as _best_match

from skills_app.core.tools.errors import ToolError

__all__ = ["check_input"]

_TYPE_WORDS = {
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "a list",
    "null": "null",
}


def check_input(tool: str, schema: Mapping[str, Any], input: Mapping[str, Any]) -> None:
    """Raise ToolError naming the wrong field when `input` does not match `schema`."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    error = _best_match(validator.iter_errors(dict(input)))
    if error is not None:
        raise ToolError(f"{tool}: {_describe(error, schema)}")


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> Draft202012Validator:
    # Keyed by the schema's text, so a tool built per run (or a changed schema) is still right.
    schema = json.loads(schema_json)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _describe(error: ValidationError, schema: Mapping[str, Any]) -> str:
    """One sentence: which field, what was expected, what was given."""
    field = ".".join(str(part) for part in error.absolute_path)
    # The stubs type these as "maybe unset"; a reported error always has them set.
    got: Any = error.instance
    rule: Any = error.validator
    value: Any = error.validator_value
    subschema: Any = error.schema
    if rule == "required":
        missing = [name for name in value if name not in got]
        name = missing[0] if missing else "?"
        expected = _expected(schema.get("properties", {}).get(name, {}))
        return f"the {name!r} argument is required ({expected})."
    if rule == "additionalProperties":
        known = sorted(schema.get("properties", {}))
        extra = sorted(set(got) - set(known))
        return (
            f"unknown argument {', '.join(map(repr, extra))}; "
            f"the arguments are {', '.join(known) or 'none'}."
        )
    if rule == "type":
        return f"{field!r} must be {_expected(subschema if isinstance(subschema, Mapping) else {})}, got {_shown(got)}."
    if rule == "minimum":
        return f"{field!r} must be at least {value}, got {_shown(got)}."
    if rule == "maximum":
        return f"{field!r} must be at most {value}, got {_shown(got)}."
    if rule == "exclusiveMinimum":
        return f"{field!r} must be greater than {value}, got {_shown(got)}."
    if rule == "enum":
        return f"{field!r} must be one of {', '.join(map(str, value))}; got {_shown(got)}."
    if rule == "minLength" and value == 1:
        return f"{field!r} must not be empty."
    where = f"{field!r}: " if field else ""
    return f"{where}{error.message}."


def _expected(prop: Mapping[str, Any]) -> str:
    kind = prop.get("type")
    if isinstance(kind, str):
        return _TYPE_WORDS.get(kind, kind)
    if isinstance(kind, list):
        return " or ".join(_TYPE_WORDS.get(str(k), str(k)) for k in kind)
    return "a value"


def _shown(value: Any) -> str:
    # The model's own value, cut so one huge argument cannot flood the error it gets back.
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."
