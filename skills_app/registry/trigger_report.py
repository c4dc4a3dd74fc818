"""The report of a trigger run: figures, misses, the chart, and the run it is compared with.

"The previous version" is the latest finished run of the same skill on another version, with the
same model and delivery profile when there is one (figures from another model are not
comparable, and the page says which it is): for a candidate, the active version's run; for the
active version, the newest older version's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from skills_app.core.chart import ChartQuery, RateChart, build_rate_chart
from skills_app.core.pricing import format_usd
from skills_app.core.triggers.cases import same_query
from skills_app.core.triggers.metrics import Miss, QueryOutcome, TriggerMetrics, misses, score
from skills_app.models import TriggerRun


@dataclass(frozen=True, slots=True)
class RunFigures:
    run: TriggerRun
    outcomes: list[QueryOutcome]
    metrics: TriggerMetrics
    held_out: TriggerMetrics | None  # the held-out queries alone, when the set marks some

    @property
    def cost(self) -> str:
        if self.run.is_demo:
            return "no cost (demo model)"
        return format_usd(self.run.cost_usd, model=self.run.model)

    @property
    def estimated(self) -> str:
        if self.run.is_demo:
            return "no cost (demo model)"
        return format_usd(self.run.estimated_cost_usd, model=self.run.model)

    @property
    def tokens(self) -> int:
        r = self.run
        return (
            r.input_tokens
            + r.cache_creation_input_tokens
            + r.cache_read_input_tokens
            + r.output_tokens
        )


def outcomes_of(run: TriggerRun) -> list[QueryOutcome]:
    return [
        QueryOutcome(
            query=r.query,
            should_trigger=r.should_trigger,
            attempts=r.attempts,
            triggered=r.triggered,
            chosen={str(k): int(v) for k, v in (r.chosen or {}).items()},
            held_out=r.held_out,
            errors=r.errors,
        )
        for r in run.results.order_by("position")
    ]


def figures(run: TriggerRun) -> RunFigures:
    outcomes = outcomes_of(run)
    held = [o for o in outcomes if o.held_out]
    return RunFigures(run, outcomes, score(outcomes), score(held) if held else None)


def previous_run(run: TriggerRun) -> TriggerRun | None:
    """The finished run of another version this one is compared with (see the module docstring)."""
    if run.package_id is None:
        return None
    others = TriggerRun.objects.filter(package_id=run.package_id, status=TriggerRun.DONE).exclude(
        Q(pk=run.pk) | Q(version_digest=run.version_digest)
    )
    same_setup = others.filter(model=run.model, profile=run.profile)
    pool = same_setup if same_setup.exists() else others
    package = run.package
    if run.version_state == "candidate" and package is not None and package.active_version_id:
        active = pool.filter(version_id=package.active_version_id).order_by("-pk").first()
        if active is not None:
            return active
    older = pool.filter(version_number__lt=run.version_number).order_by("-version_number", "-pk")
    return older.first() or pool.order_by("-pk").first()


def chart(current: RunFigures, previous: RunFigures | None) -> RateChart:
    rows = []
    for number, outcome in enumerate(current.outcomes, start=1):
        before = None
        if previous is not None:
            match = next((o for o in previous.outcomes if same_query(o.query, outcome.query)), None)
            before = match.rate if match is not None else None
        rows.append(ChartQuery(number, outcome.query, outcome.should_trigger, outcome.rate, before))
    label = f"v{previous.run.version_number}" if previous is not None else ""
    return build_rate_chart(rows, previous_label=label)


def common_queries(a: RunFigures, b: RunFigures) -> int:
    return sum(1 for o in a.outcomes if any(same_query(o.query, p.query) for p in b.outcomes))


def report_context(run: TriggerRun, *, against: TriggerRun | None = None) -> dict[str, Any]:
    """Everything the report page shows."""
    current = figures(run)
    compared = against or previous_run(run)
    before = figures(compared) if compared is not None else None
    found: list[Miss] = misses(current.outcomes)
    numbered = {id(o): n for n, o in enumerate(current.outcomes, start=1)}
    return {
        "run": run,
        "current": current,
        "previous": before,
        "same_setup": before is not None
        and (before.run.model, before.run.profile) == (run.model, run.profile),
        "common": common_queries(current, before) if before is not None else 0,
        "false_triggers": [
            (numbered[id(m.outcome)], m) for m in found if not m.outcome.should_trigger
        ],
        "missed_triggers": [
            (numbered[id(m.outcome)], m) for m in found if m.outcome.should_trigger
        ],
        "chart": chart(current, before),
        "rows": list(enumerate(current.outcomes, start=1)),
    }


def latest_by_version(package_id: int) -> dict[int, TriggerRun]:
    """Each version's latest finished trigger run."""
    latest: dict[int, TriggerRun] = {}
    done = TriggerRun.objects.filter(package_id=package_id, status=TriggerRun.DONE)
    for run in done.exclude(version__isnull=True).order_by("-pk"):
        assert run.version_id is not None
        latest.setdefault(run.version_id, run)
    return latest


def activation_comparison(package: Any, version: Any) -> dict[str, Any]:
    """What the admin sees before activating `version`: its trigger figures beside the active
    version's (the runs with the same model and profile when both have them)."""
    active_id = package.active_version_id
    done = TriggerRun.objects.filter(package_id=package.pk, status=TriggerRun.DONE)
    mine = list(done.filter(version_id=version.pk).order_by("-pk"))
    theirs = list(done.filter(version_id=active_id).order_by("-pk")) if active_id else []
    pair = next(
        ((a, b) for a in mine for b in theirs if (a.model, a.profile) == (b.model, b.profile)),
        None,
    )
    candidate_run = pair[0] if pair else (mine[0] if mine else None)
    active_run = pair[1] if pair else (theirs[0] if theirs else None)
    return {
        "candidate_run": candidate_run,
        "candidate": figures(candidate_run) if candidate_run else None,
        "active_run": active_run,
        "active": figures(active_run) if active_run else None,
        "same_setup": pair is not None,
    }
