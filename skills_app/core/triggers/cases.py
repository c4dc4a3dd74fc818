"""Trigger sets as JSON: `[{"query": "...", "should_trigger": true}]`, read strictly, written back.

The shape is the one skill authors already use offline (the public `skill-creator` method). An
optional `"held_out": true` marks a query kept apart from description tuning, so the report can
show how the description does on queries it was not tuned on. Other keys are ignored, so a file
made for other tools still imports. Every error names the item and says what to write instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MAX_CASES = 200
MAX_QUERY_CHARS = 2_000
EXAMPLE = '[{"query": "turn this PDF into a table", "should_trigger": true}]'


class TriggerSetError(ValueError):
    """A trigger set or query that cannot be taken; the message says what to write instead."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class TriggerCase:
    """One test query: a user's first message, and whether the skill should be chosen for it."""

    query: str
    should_trigger: bool
    held_out: bool = False

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"query": self.query, "should_trigger": self.should_trigger}
        if self.held_out:
            data["held_out"] = True
        return data


def check_query(text: str, *, where: str = "The query") -> str:
    """The query as stored (surrounding space removed); TriggerSetError when it cannot be one."""
    query = text.strip()
    if not query:
        raise TriggerSetError(f"{where} is empty: write the request as a user would type it.")
    if len(query) > MAX_QUERY_CHARS:
        raise TriggerSetError(
            f"{where} is {len(query):,} characters long; a query may have at most "
            f"{MAX_QUERY_CHARS:,}. Shorten it."
        )
    if query.startswith("/"):
        # A slash command loads the skill without the model choosing it: nothing to measure.
        raise TriggerSetError(
            f"{where} starts with /, which runs a skill directly instead of letting the model "
            "choose; write the request in words."
        )
    return query


def _flag(item: dict[str, Any], key: str, where: str, *, required: bool) -> bool:
    if key not in item:
        if not required:
            return False
        raise TriggerSetError(
            f'{where} has no "{key}": add "{key}": true (the skill should be chosen) or false '
            "(it should not)."
        )
    value = item[key]
    if not isinstance(value, bool):
        raise TriggerSetError(
            f'{where}: "{key}" must be true or false (without quotes), not {json.dumps(value)}.'
        )
    return value


def parse_cases(text: str, *, limit: int = MAX_CASES) -> list[TriggerCase]:
    """The cases of a JSON trigger set; TriggerSetError naming the first problem."""
    if not text.strip():
        raise TriggerSetError(f"Nothing to import: paste a JSON list such as {EXAMPLE}.")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TriggerSetError(
            f"This is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}). "
            f"Expected a list such as {EXAMPLE}."
        ) from None
    except RecursionError:
        raise TriggerSetError(
            "This JSON is nested too deeply; a trigger set is a flat list."
        ) from None
    if not isinstance(data, list):
        kind = type(data).__name__ if not isinstance(data, dict) else "an object"
        raise TriggerSetError(
            f"Expected a JSON list of queries, got {kind}: put the queries in [ ], as in {EXAMPLE}."
        )
    if len(data) > limit:
        raise TriggerSetError(
            f"The list has {len(data)} queries; a trigger set holds at most {limit}. "
            "Keep the ones that matter most (about 20, half of them near misses, is typical)."
        )
    cases: list[TriggerCase] = []
    seen: dict[str, int] = {}
    for number, item in enumerate(data, start=1):
        where = f"Item {number}"
        if not isinstance(item, dict):
            raise TriggerSetError(
                f"{where} is {json.dumps(item)[:60]}, not an object: write it as "
                '{"query": "...", "should_trigger": true}.'
            )
        if "query" not in item:
            raise TriggerSetError(f'{where} has no "query": give the user\'s request as text.')
        if not isinstance(item["query"], str):
            raise TriggerSetError(f'{where}: "query" must be text in quotes.')
        query = check_query(item["query"], where=f"{where}'s query")
        should = _flag(item, "should_trigger", where, required=True)
        held_out = _flag(item, "held_out", where, required=False)
        key = " ".join(query.lower().split())
        if key in seen:
            raise TriggerSetError(
                f"{where} repeats the query of item {seen[key]}; each query may appear once."
            )
        seen[key] = number
        cases.append(TriggerCase(query, should, held_out))
    return cases


def dump_cases(cases: Iterable[TriggerCase]) -> str:
    """The trigger set as JSON that `parse_cases` reads back unchanged."""
    return json.dumps([c.as_json() for c in cases], indent=2, ensure_ascii=False) + "\n"


def same_query(a: str, b: str) -> bool:
    """Whether two queries are the same for a trigger set (case and spacing aside)."""
    return " ".join(a.lower().split()) == " ".join(b.lower().split())
