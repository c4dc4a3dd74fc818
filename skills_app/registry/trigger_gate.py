"""The trigger gate: a skill whose trigger tests fail cannot be submitted for review.

A per-skill setting (`SkillPackage.trigger_gate`, off by default). When it is on, a version may
go to review only once a finished trigger run *on that version* answered every query of the
skill's current trigger set and passed each one (trigger rate on the right side of one half,
as the report judges a query). The review workflow calls `trigger_gate(version)` before it
accepts a submission and shows the reason either way; it lives in the registry, beside the
review, and reads the runs' stored results itself (the trigger tests sit a layer above).
"""

from __future__ import annotations

from skills_app.core.triggers.cases import same_query
from skills_app.core.triggers.metrics import QueryOutcome
from skills_app.models import SkillVersion, TriggerRun
from skills_app.registry.trigger_sets import cases_of


def trigger_gate(version: SkillVersion) -> tuple[bool, str]:
    """(may be submitted, why): the gate's verdict on `version`, in words a person can act on."""
    package = version.package
    if not package.trigger_gate:
        return True, "The trigger gate is off for this skill."
    cases = cases_of(package)
    if not cases:
        return False, (
            "The trigger gate is on, but the skill has no trigger set: add queries on its "
            "trigger-test page and run them on this version."
        )
    run = (
        TriggerRun.objects.filter(version=version, status=TriggerRun.DONE)
        .order_by("-finished_at", "-pk")
        .first()
    )
    if run is None:
        return False, (
            f"The trigger gate is on: run the trigger tests on version {version.number} "
            "before submitting it for review."
        )
    outcomes = [
        QueryOutcome(r.query, r.should_trigger, r.attempts, r.triggered, errors=r.errors)
        for r in run.results.order_by("position")
    ]
    untested = [c for c in cases if not any(same_query(c.query, o.query) for o in outcomes)]
    if untested:
        return False, (
            f"Trigger run #{run.pk} on version {version.number} predates {len(untested)} "
            "quer" + ("y" if len(untested) == 1 else "ies") + " of the current set; run the "
            "trigger tests again."
        )
    current = [o for o in outcomes if any(same_query(o.query, c.query) for c in cases)]
    unanswered = [o for o in current if o.passed is None]
    failed = [o for o in current if o.passed is False]
    if failed or unanswered:
        parts = []
        if failed:
            parts.append(f"{len(failed)} of {len(current)} queries failed")
        if unanswered:
            parts.append(f"{len(unanswered)} got no answer (API errors)")
        first = (failed or unanswered)[0]
        expected = "should trigger" if first.should_trigger else "should not trigger"
        return False, (
            f"Trigger run #{run.pk} on version {version.number}: {' and '.join(parts)} (e.g. "
            f"“{first.query[:80]}”, which {expected}). Improve the description, upload the new "
            "version and run the trigger tests on it."
        )
    demo = " (by the offline demo model, not Claude)" if run.is_demo else ""
    return True, (
        f"Trigger run #{run.pk} on version {version.number} passed all {len(current)} "
        f"queries{demo}."
    )
