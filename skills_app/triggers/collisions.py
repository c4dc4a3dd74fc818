"""Collisions across skills: which other skills take the queries meant for a skill.

For every skill with a finished trigger run (the latest run of its active version, else its latest
run), the attempts of its *should-trigger* queries are counted by what the model chose: the skill
itself, another skill (a collision), or none. Should-not queries are left out: near misses are
written to go elsewhere. Only the runs the viewer may read are used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from skills_app.models import TriggerRun


@dataclass(slots=True)
class SkillRow:
    skill: str
    run: TriggerRun
    attempts: int = 0
    itself: int = 0
    none: int = 0
    taken: dict[str, int] = field(default_factory=dict)  # other skill -> attempts
    queries_taken: dict[str, int] = field(default_factory=dict)  # other skill -> queries


@dataclass(frozen=True, slots=True)
class Collision:
    victim: str
    thief: str
    attempts: int
    queries: int
    share: float  # of the victim's should-trigger attempts


def latest_runs(runs: QuerySet[TriggerRun]) -> list[TriggerRun]:
    """Per skill package, the run the collisions view reads (see the module docstring)."""
    chosen: dict[int, tuple[bool, TriggerRun]] = {}
    done = runs.filter(status=TriggerRun.DONE, package__isnull=False).select_related("package")
    for run in done.order_by("-pk"):
        package = run.package
        if package is None:
            continue
        active = run.version_id == package.active_version_id
        current = chosen.get(package.pk)
        # Newest first: keep the first run seen, unless a run of the active version comes later.
        if current is None or (active and not current[0]):
            chosen[package.pk] = (active, run)
    return sorted((run for _active, run in chosen.values()), key=lambda r: r.skill)


def confusion(runs: QuerySet[TriggerRun]) -> dict[str, Any]:
    """Rows per tested skill, the columns (every skill chosen), the matrix and the worst pairs."""
    rows: list[SkillRow] = []
    for run in latest_runs(runs):
        row = SkillRow(run.skill, run)
        for result in run.results.filter(should_trigger=True):
            row.attempts += result.attempts
            row.itself += result.triggered
            other = 0
            for name, count in (result.chosen or {}).items():
                row.taken[name] = row.taken.get(name, 0) + int(count)
                row.queries_taken[name] = row.queries_taken.get(name, 0) + 1
                other += int(count)
            row.none += result.attempts - result.triggered - other
        rows.append(row)
    columns = sorted({name for row in rows for name in row.taken} | {row.skill for row in rows})
    matrix = [
        (
            row,
            [
                (name, row.itself if name == row.skill else row.taken.get(name, 0))
                for name in columns
            ],
        )
        for row in rows
    ]
    pairs = [
        Collision(
            row.skill,
            thief,
            count,
            row.queries_taken[thief],
            count / row.attempts if row.attempts else 0.0,
        )
        for row in rows
        for thief, count in row.taken.items()
        if count
    ]
    pairs.sort(key=lambda c: (-c.share, -c.attempts, c.victim, c.thief))
    return {"rows": rows, "columns": columns, "matrix": matrix, "pairs": pairs}
