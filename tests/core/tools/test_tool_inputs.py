"""Tool inputs are checked against the schema the model sees: one case per rule, no workspace."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from skills_app.core.tools import ToolContext, ToolError, Workspace, default_tools
from skills_app.core.tools.inputs import check_input

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "count": {"type": "integer", "minimum": 1},
        "timeout": {"type": "number", "exclusiveMinimum": 0},
        "mode": {"type": "string", "enum": ["a", "b"]},
        "flag": {"type": "boolean"},
    },
    "required": ["path"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({}, "T: the 'path' argument is required (a string)."),
        ({"path": 3}, "T: 'path' must be a string, got 3."),
        ({"path": ""}, "T: 'path' must not be empty."),
        ({"path": "x", "count": 0}, "T: 'count' must be at least 1, got 0."),
        ({"path": "x", "count": "2"}, "T: 'count' must be a whole number, got '2'."),
        ({"path": "x", "count": 1.5}, "T: 'count' must be a whole number, got 1.5."),
        ({"path": "x", "flag": 1}, "T: 'flag' must be true or false, got 1."),
        ({"path": "x", "timeout": 0}, "T: 'timeout' must be greater than 0, got 0."),
        ({"path": "x", "mode": "c"}, "T: 'mode' must be one of a, b; got 'c'."),
        (
            {"path": "x", "colour": "red"},
            "T: unknown argument 'colour'; the arguments are count, flag, mode, path, timeout.",
        ),
    ],
)
def test_it_names_the_wrong_field_and_what_was_expected(
    given: dict[str, object], message: str
) -> None:
    with pytest.raises(ToolError) as raised:
        check_input("T", SCHEMA, given)
    assert str(raised.value) == message


def test_it_accepts_a_valid_input_and_a_whole_float() -> None:
    check_input("T", SCHEMA, {"path": "x", "count": 2.0, "timeout": 0.5, "mode": "a"})


def test_it_cuts_a_huge_value_in_the_error() -> None:
    with pytest.raises(ToolError) as raised:
        check_input("T", SCHEMA, {"path": ["y" * 10_000]})
    assert len(str(raised.value)) < 200


def test_every_tool_schema_is_a_valid_json_schema() -> None:
    for tool in default_tools():
        Draft202012Validator.check_schema(tool.input_schema)


@pytest.mark.parametrize("tool", [t.name for t in default_tools()])
async def test_every_tool_refuses_an_empty_input_before_touching_the_workspace(
    tool: str, tmp_path: Path
) -> None:
    ctx = ToolContext(workspace=Workspace(tmp_path / "conv"))
    result = await default_tools().call(tool, {}, ctx)
    assert result.is_error
    assert "argument is required" in result.content
