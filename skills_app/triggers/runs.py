"""Planning, starting and stopping trigger runs (the rows; `executor` makes the model calls).

A run is planned first (`plan_run`): the cost is estimated from the very requests the run will
send, so the page can show it before anything is spent. `create_run` stores the run and one
result row per query; the run is `queued` until an executor claims it (at once when inline).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from skills_app.core.llm import ModelClient
from skills_app.core.profiles import PROFILES
from skills_app.core.triggers.cases import TriggerCase
from skills_app.core.triggers.probe import estimate_cost, estimate_input
from skills_app.models import SkillPackage, SkillVersion, TriggerResult, TriggerRun
from skills_app.policy import limits
from skills_app.policy.access import policy_for
from skills_app.registry.trigger_sets import cases_of
from skills_app.runs import jobs
from skills_app.triggers.setup import ProbeSetup, TriggerRunError, catalog_text, probe_setup

# Trigger runs are jobs like agent runs: claimed, beaten and swept by `runs.jobs`.
TRIGGER_RUNS = jobs.Kind(
    "trigger run",
    TriggerRun.objects,
    active=TriggerRun.ACTIVE,
    executing=(TriggerRun.RUNNING,),
    claimed_field="started_at",
)

STOPPED_TEXT = "Stopped by the user."
STALE_TEXT = (
    "The process running it stopped (its heartbeat went stale). Start the run again; the "
    "answers recorded so far are kept."
)


@dataclass(frozen=True, slots=True)
class RunPlan:
    """A run as it would start now: what it measures and what it is estimated to cost."""

    package: SkillPackage
    version: SkillVersion
    model: str
    profile: str
    repetitions: int
    cases: list[TriggerCase]
    setup: ProbeSetup
    estimated_input_tokens: int
    estimated_cost: Decimal | None
    is_demo: bool

    @property
    def attempts(self) -> int:
        return len(self.cases) * self.repetitions

    @property
    def version_state(self) -> str:
        return "active" if self.package.active_version_id == self.version.pk else "candidate"


def offered_models(user_id: int | None) -> list[str]:
    """The models a run may use: those the person's policy offers in conversations."""
    return list(policy_for(user_id).models)


def plan_run(
    package: SkillPackage,
    *,
    version_id: Any,
    model: str,
    profile: str,
    repetitions: Any,
    client: ModelClient,
    user_id: int | None,
) -> RunPlan:
    """Check the choices and build the run's requests; TriggerRunError says what to change."""
    try:
        version = package.versions.get(pk=int(version_id))
    except (TypeError, ValueError, SkillVersion.DoesNotExist):
        raise TriggerRunError(f"Choose one of the versions of {package.name}.") from None
    offered = offered_models(user_id)
    if model not in offered:
        raise TriggerRunError(f"Choose one of the offered models: {', '.join(offered)}.")
    if profile not in PROFILES:
        raise TriggerRunError(f"Choose a delivery profile: {', '.join(PROFILES)}.")
    limit = settings.TRIGGER_MAX_REPETITIONS
    try:
        reps = int(repetitions)
    except (TypeError, ValueError):
        reps = 0
    if not 1 <= reps <= limit:
        raise TriggerRunError(f"Repetitions must be a whole number from 1 to {limit}.")
    cases = cases_of(package)
    if not cases:
        raise TriggerRunError(
            "The trigger set is empty: add queries (or import them as JSON) before running it."
        )
    setup = probe_setup(package, version, model=model, profile=profile)
    tokens = estimate_input([setup.request(c.query) for c in cases], reps)
    return RunPlan(
        package=package,
        version=version,
        model=model,
        profile=profile,
        repetitions=reps,
        cases=cases,
        setup=setup,
        estimated_input_tokens=tokens,
        estimated_cost=None if client.is_demo else estimate_cost(model, tokens),
        is_demo=client.is_demo,
    )


def create_run(plan: RunPlan, *, user: Any, client: ModelClient) -> TriggerRun:
    """Store the run (queued) with a result row per query; one active run per person, within
    their limits (`policy.limits`, checked here under a lock on their row: one check per run)."""
    with transaction.atomic():
        limits.hold(user.pk)
        try:
            cost = None if plan.is_demo else (plan.estimated_cost or Decimal(0))
            limits.check_trigger_run(user.pk, estimated_cost=cost)
        except limits.LimitReached as exc:
            raise TriggerRunError(exc.message) from None
        active = TriggerRun.objects.filter(started_by=user, status__in=TriggerRun.ACTIVE).first()
        if active is not None:
            raise TriggerRunError(
                f"Your trigger run #{active.pk} ({active.skill} v{active.version_number}) is "
                "still going; wait for it or stop it before starting another."
            )
        run = TriggerRun.objects.create(
            package=plan.package,
            version=plan.version,
            skill=plan.package.name,
            version_number=plan.version.number,
            version_digest=plan.version.digest,
            owner_id=plan.package.owner_id,
            version_state=plan.version_state,
            description=catalog_text(plan.setup.spec),
            listed=plan.setup.listed,
            competitors=plan.setup.competitors(),
            started_by=user,
            started_by_name=user.get_username(),
            model=plan.model,
            model_label=client.label,
            is_demo=plan.is_demo,
            profile=plan.profile,
            repetitions=plan.repetitions,
            attempts_total=plan.attempts,
            estimated_input_tokens=plan.estimated_input_tokens,
            estimated_cost_usd=plan.estimated_cost,
        )
        TriggerResult.objects.bulk_create(
            TriggerResult(
                run=run,
                position=i,
                query=c.query,
                should_trigger=c.should_trigger,
                held_out=c.held_out,
            )
            for i, c in enumerate(plan.cases)
        )
    return run


def stop_queued(run_id: int) -> bool:
    """Stop a run no executor has claimed (the same conditional update as a claim: one wins)."""
    return jobs.stop_queued(TRIGGER_RUNS, run_id, error=STOPPED_TEXT, finished_at=timezone.now())


def request_stop(run_id: int) -> None:
    """Ask the process running it to stop (it reads the flag with its heartbeat)."""
    jobs.request_stop(TRIGGER_RUNS, run_id)


def interrupt_stale() -> int:
    """Mark running trigger runs whose process is gone (a dead worker, a stale heartbeat)
    interrupted; how many. Nothing else to close: the answers recorded so far are kept."""
    return TriggerRun.objects.filter(jobs.orphaned(TRIGGER_RUNS)).update(
        status=TriggerRun.INTERRUPTED, error=STALE_TEXT, finished_at=timezone.now()
    )
