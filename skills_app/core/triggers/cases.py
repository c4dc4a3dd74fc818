"""Trigger sets as JSON: `[{"query": "...", "should_trigger": true}]`, read strictly, written back.

The shape is the one skill authors already use offline: skill-creator's eval set (authors ship it
as `evals/trigger-eval.json`), the Agent Skills guide's `eval_queries.json`, and our own
`evals/trigger.json`. An optional `"held_out": true` marks a query kept apart from description
tuning, so the report can show how the description does on queries it was not tuned on. Other
keys are ignored, so a file made for other tools still imports. Variants seen in published
skills are read too: the list under a `"queries"`, `"cases"` or `"results"` key (the last is
skill-creator's `run_eval` output, so a results file re-imports its queries), and `"prompt"` /
`"expected_trigger"` for `"query"` / `"should_trigger"`.

A query starting with `/` is a slash command: it runs the skill without the model choosing, so
there is nothing to measure. It is skipped and reported; the rest of the set is taken. A file of
another kind of eval (skill-creator's output-quality `evals.json`) is refused with its name.
Every error names the item and says what to write instead.
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


@dataclass(frozen=True, slots=True)
class TriggerSet:
    """A trigger set as read from a file: its cases, and why any query was left out."""

    cases: list[TriggerCase]
    skipped: tuple[str, ...] = ()


# Keys under which published trigger sets keep their list, in the order they are looked for.
LIST_KEYS = ("queries", "cases", "eval_set", "results")
# The same meaning under other names: (ours, theirs).
ALIASES = (("query", "prompt"), ("should_trigger", "expected_trigger"))
OUTPUT_EVALS = (
    "This is skill-creator's output-quality eval file (evals.json: prompts with the output "
    "expected, graded after a full run), not a trigger set. A trigger set lists first messages "
    f"and whether the skill should be chosen for each: {EXAMPLE}; skill authors keep it in "
    "evals/trigger-eval.json."
)


def _slash_command(query: str) -> bool:
    return query.strip().startswith("/")


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


def _items(data: Any) -> list[Any]:
    """The list of queries in a file's JSON, or TriggerSetError naming what the file is."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in LIST_KEYS:
            if isinstance(data.get(key), list):
                return list(data[key])
        evals = data.get("evals")
        if isinstance(evals, list) and not any(
            isinstance(e, dict) and ("should_trigger" in e or "expected_trigger" in e)
            for e in evals
        ):
            raise TriggerSetError(OUTPUT_EVALS)
        if isinstance(evals, list):
            return list(evals)
    kind = type(data).__name__ if not isinstance(data, dict) else "an object"
    raise TriggerSetError(
        f"Expected a JSON list of queries, got {kind}: put the queries in [ ], as in {EXAMPLE}."
    )


def read_set(text: str, *, limit: int = MAX_CASES) -> TriggerSet:
    """A trigger set file read whole: cases, and the queries skipped (slash commands)."""
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
    items = _items(data)
    if len(items) > limit:
        raise TriggerSetError(
            f"The list has {len(items)} queries; a trigger set holds at most {limit}. "
            "Keep the ones that matter most (about 20, half of them near misses, is typical)."
        )
    cases: list[TriggerCase] = []
    skipped: list[str] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(items, start=1):
        where = f"Item {number}"
        if not isinstance(raw, dict):
            raise TriggerSetError(
                f"{where} is {json.dumps(raw)[:60]}, not an object: write it as "
                '{"query": "...", "should_trigger": true}.'
            )
        item = dict(raw)
        for ours, theirs in ALIASES:
            if ours not in item and theirs in item:
                item[ours] = item[theirs]
        if "query" not in item:
            if "expected_output" in item or "expectations" in item:
                raise TriggerSetError(OUTPUT_EVALS)
            raise TriggerSetError(f'{where} has no "query": give the user\'s request as text.')
        if not isinstance(item["query"], str):
            raise TriggerSetError(f'{where}: "query" must be text in quotes.')
        if _slash_command(item["query"]):
            shown = " ".join(item["query"].split())
            shown = shown if len(shown) <= 40 else shown[:39] + "…"
            skipped.append(
                f"{where} ({shown}) is a slash command: it runs a skill directly instead of "
                "letting the model choose, so there is nothing to measure; it was skipped."
            )
            continue
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
    if not cases and skipped:
        raise TriggerSetError(
            f"Every query ({len(skipped)}) is a slash command, which runs a skill without the "
            "model choosing; write the requests in words."
        )
    return TriggerSet(cases, tuple(skipped))


def dump_cases(cases: Iterable[TriggerCase]) -> str:
    """The trigger set as JSON that `read_set` reads back unchanged."""
    return json.dumps([c.as_json() for c in cases], indent=2, ensure_ascii=False) + "\n"


def same_query(a: str, b: str) -> bool:
    """Whether two queries are the same for a trigger set (case and spacing aside)."""
    return " ".join(a.lower().split()) == " ".join(b.lower().split())
