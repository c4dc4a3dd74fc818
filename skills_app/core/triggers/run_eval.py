"""A trigger run's results in the shape skill-creator's `run_eval` script writes.

skill-creator's description loop (`run_loop`, `improve_description`, `generate_report`) reads
this JSON, so a run made here can feed it: `skill_name`, `description`, `results` (one per
query: `query`, `should_trigger`, `trigger_rate`, `triggers`, `runs`, `pass`) and `summary`
(`total`, `passed`, `failed`). A query's `runs` are its answered attempts; attempts that failed
(an API error) are not runs, as the script counts a failed query as not triggered instead: a
query none of whose attempts were answered is left out, since it has no rate to judge.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .metrics import QueryOutcome


def run_eval_results(
    skill_name: str, description: str, outcomes: Sequence[QueryOutcome]
) -> dict[str, Any]:
    """The JSON value skill-creator's run_eval prints for the same queries and outcomes."""
    results = [
        {
            "query": o.query,
            "should_trigger": o.should_trigger,
            "trigger_rate": o.rate,
            "triggers": o.triggered,
            "runs": o.attempts,
            "pass": o.passed,
        }
        for o in outcomes
        if o.attempts
    ]
    passed = sum(1 for r in results if r["pass"])
    return {
        "skill_name": skill_name,
        "description": description,
        "results": results,
        "summary": {"total": len(results), "passed": passed, "failed": len(results) - passed},
    }
