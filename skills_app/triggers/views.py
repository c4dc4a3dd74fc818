"""Trigger-test pages: the sets, a run's plan (with its estimated cost), the report, collisions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from skills_app.core.profiles import DEFAULT_PROFILE, PROFILES
from skills_app.core.triggers.cases import TriggerSetError
from skills_app.core.triggers.run_eval import run_eval_results
from skills_app.http import AuthedHttpRequest
from skills_app.models import SkillPackage, TriggerQuery, TriggerRun
from skills_app.policy.access import policy_for
from skills_app.registry import trigger_sets as sets
from skills_app.registry.trigger_gate import trigger_gate
from skills_app.registry.trigger_report import figures, outcomes_of, report_context
from skills_app.runs.client import model_client
from skills_app.triggers import access, executor, runs
from skills_app.triggers.collisions import confusion
from skills_app.triggers.forms import ImportForm, QueryForm
from skills_app.triggers.setup import TriggerRunError


def _latest_runs(packages: Sequence[SkillPackage]) -> dict[int, TriggerRun]:
    latest: dict[int, TriggerRun] = {}
    rows = TriggerRun.objects.filter(package__in=packages).order_by("-pk")
    for run in rows:
        assert run.package_id is not None
        latest.setdefault(run.package_id, run)
    return latest


@login_required
@require_GET
def triggers_home(request: HttpRequest) -> HttpResponse:
    """Every skill package whose trigger tests this person may read."""
    runs.interrupt_stale()
    packages = list(
        access.viewable_packages(request.user)
        .select_related("active_version", "owner")
        .annotate(
            should=Count("trigger_queries", filter=Q(trigger_queries__should_trigger=True)),
            should_not=Count("trigger_queries", filter=Q(trigger_queries__should_trigger=False)),
        )
        .order_by("owner_id", "name")
    )
    latest = _latest_runs(packages)
    rows = [
        {
            "package": p,
            "latest": latest.get(p.pk),
            "figures": figures(latest[p.pk]) if p.pk in latest else None,
            "can_manage": access.can_manage(request.user, p),
        }
        for p in packages
    ]
    return render(
        request,
        "skills_app/triggers/home.html",
        {"rows": rows, "organisation": access.can_see_organisation(request.user)},
    )


def _package_context(request: HttpRequest, package: SkillPackage, **extra: Any) -> dict[str, Any]:
    versions = list(package.versions.order_by("-number"))
    active = package.active_version_id
    candidates = [v for v in versions if v.pk != active and (not active or v.pk > active)]
    picked = str(request.GET.get("version") or (candidates[0].pk if candidates else active or ""))
    package_runs = list(package.trigger_runs.order_by("-pk")[:30])
    client = model_client()
    return {
        "package": package,
        "queries": sets.queries_of(package),
        "versions": versions,
        "candidates": candidates,
        "picked_version": picked,
        "runs": [(r, figures(r)) for r in package_runs],
        "can_manage": access.can_manage(request.user, package),
        "models": runs.offered_models(request.user.pk),
        "default_model": policy_for(request.user.pk).default_model(),
        "profiles": PROFILES,
        "default_profile": DEFAULT_PROFILE,
        "repetitions": settings.TRIGGER_REPETITIONS,
        "max_repetitions": settings.TRIGGER_MAX_REPETITIONS,
        "is_demo": client.is_demo,
        **_gate_context(package),
        "add_form": extra.pop("add_form", None) or QueryForm(),
        "import_form": extra.pop("import_form", None) or ImportForm(),
        **extra,
    }


def _gate_context(package: SkillPackage) -> dict[str, Any]:
    # The newest version: the one a submission for review would be about (a draft, usually).
    version = package.versions.order_by("-number").first()
    if version is None:
        return {"gate_ok": True, "gate_reason": ""}
    ok, reason = trigger_gate(version)
    return {"gate_ok": ok, "gate_reason": f"Version {version.number}: {reason}"}


@login_required
@require_POST
def gate_setting(request: HttpRequest, pk: int) -> HttpResponse:
    """Turn the skill's trigger gate on or off (its managers)."""
    package = access.get_package_for_change(request.user, pk)
    package.trigger_gate = request.POST.get("trigger_gate") == "on"
    package.save(update_fields=["trigger_gate", "updated_at"])
    return _back(package, "gate")


def _package_page(
    request: HttpRequest, package: SkillPackage, *, status: int = 200, **extra: Any
) -> HttpResponse:
    context = _package_context(request, package, **extra)
    return render(request, "skills_app/triggers/package.html", context, status=status)


@login_required
@require_GET
def package_page(request: HttpRequest, pk: int) -> HttpResponse:
    """A package's trigger set, its runs, and the form that starts one."""
    runs.interrupt_stale()
    return _package_page(request, access.get_package_for_view(request.user, pk))


def _back(package: SkillPackage, anchor: str = "queries") -> HttpResponse:
    return redirect(reverse("triggers-package", args=[package.pk]) + f"#{anchor}")


@login_required
@require_POST
def query_add(request: HttpRequest, pk: int) -> HttpResponse:
    package = access.get_package_for_change(request.user, pk)
    form = QueryForm(request.POST)
    if not form.is_valid():
        return _package_page(request, package, status=400, add_form=form)
    try:
        sets.add_query(
            package,
            form.cleaned_data["query"],
            form.should_trigger,
            held_out=form.cleaned_data["held_out"],
            user=request.user,
        )
    except TriggerSetError as exc:
        form.add_error("query", exc.message)
        return _package_page(request, package, status=400, add_form=form)
    return _back(package)


def _get_query(package: SkillPackage, query_id: int) -> TriggerQuery:
    row = package.trigger_queries.filter(pk=query_id).first()
    if row is None:
        raise Http404("No such query in this trigger set.")
    return row


@login_required
@require_POST
def query_edit(request: HttpRequest, pk: int, query_id: int) -> HttpResponse:
    package = access.get_package_for_change(request.user, pk)
    row = _get_query(package, query_id)
    form = QueryForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            sets.edit_query(
                row,
                form.cleaned_data["query"],
                form.should_trigger,
                held_out=form.cleaned_data["held_out"],
            )
        except TriggerSetError as exc:
            error = exc.message
    else:
        error = " ".join(str(e) for errors in form.errors.values() for e in errors)
    if error:
        return _package_page(request, package, status=400, edit_error=error, edit_id=row.pk)
    return _back(package, f"query-{row.pk}")


@login_required
@require_POST
def query_remove(request: HttpRequest, pk: int, query_id: int) -> HttpResponse:
    package = access.get_package_for_change(request.user, pk)
    _get_query(package, query_id).delete()
    return _back(package)


@login_required
@require_POST
def set_import(request: HttpRequest, pk: int) -> HttpResponse:
    package = access.get_package_for_change(request.user, pk)
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _package_page(request, package, status=400, import_form=form)
    try:
        done = sets.import_cases(
            package, form.cases, replace=form.cleaned_data["replace"], user=request.user
        )
    except TriggerSetError as exc:
        form.add_error(None, exc.message)
        return _package_page(request, package, status=400, import_form=form)
    notice = f"Imported: {done.sentence()}."
    if form.skipped:
        notice += " Skipped: " + " ".join(form.skipped)
    return _package_page(request, package, notice=notice)


@login_required
@require_GET
def set_export(request: HttpRequest, pk: int) -> HttpResponse:
    package = access.get_package_for_view(request.user, pk)
    response = HttpResponse(sets.export_json(package), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{package.name}-trigger.json"'
    return response


@login_required
@require_GET
def run_plan(request: HttpRequest, pk: int) -> HttpResponse:
    """The run as it would start: its requests' estimated cost, before anything is spent."""
    package = access.get_package_for_change(request.user, pk)
    client = model_client()
    try:
        plan = runs.plan_run(
            package,
            version_id=request.GET.get("version"),
            model=request.GET.get("model", ""),
            profile=request.GET.get("profile", ""),
            repetitions=request.GET.get("repetitions"),
            client=client,
            user_id=request.user.pk,
        )
    except TriggerRunError as exc:
        return _package_page(request, package, status=400, run_error=exc.message)
    return render(request, "skills_app/triggers/plan.html", {"plan": plan, "client": client})


@login_required
@require_POST
async def run_start(request: HttpRequest, pk: int) -> HttpResponse:
    """Start a planned run; the report page shows its progress."""
    user = await request.auser()
    package = await sync_to_async(access.get_package_for_change)(user, pk)
    client = model_client()
    try:
        plan = await sync_to_async(runs.plan_run)(
            package,
            version_id=request.POST.get("version"),
            model=request.POST.get("model", ""),
            profile=request.POST.get("profile", ""),
            repetitions=request.POST.get("repetitions"),
            client=client,
            user_id=user.pk,
        )
        run = await sync_to_async(runs.create_run)(plan, user=user, client=client)
    except TriggerRunError as exc:
        return await sync_to_async(_package_page)(
            request, package, status=400, run_error=exc.message
        )
    await executor.submit(run, client=client)
    return redirect("triggers-run", run.pk)


def _run_context(request: HttpRequest, run: TriggerRun) -> dict[str, Any]:
    against = None
    if request.GET.get("against"):
        try:
            against = (
                access.viewable_runs(request.user)
                .filter(
                    pk=int(request.GET["against"]),
                    package_id=run.package_id,
                    status=TriggerRun.DONE,
                )
                .first()
            )
        except ValueError:
            against = None
    context = report_context(run, against=against)
    context["can_manage"] = access.can_manage_owned(request.user, run.owner_id)
    context["others"] = (
        access.viewable_runs(request.user)
        .filter(package_id=run.package_id, status=TriggerRun.DONE)
        .exclude(pk=run.pk)
        .order_by("-pk")[:20]
        if run.package_id
        else []
    )
    return context


@login_required
@require_GET
def run_report(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    runs.interrupt_stale()
    run = access.get_run_for_view(request.user, pk)
    template = (
        "skills_app/triggers/_run_body.html" if request.htmx else "skills_app/triggers/run.html"
    )
    return render(request, template, _run_context(request, run))


@login_required
@require_POST
async def run_stop(request: HttpRequest, pk: int) -> HttpResponse:
    user = await request.auser()
    run = await sync_to_async(access.get_run_for_change)(user, pk)
    await executor.stop(run.pk)
    return redirect("triggers-run", run.pk)


@login_required
@require_GET
def collisions_page(request: HttpRequest) -> HttpResponse:
    """Which skills take each other's queries, over the runs this person may read."""
    context = confusion(access.viewable_runs(request.user))
    return render(request, "skills_app/triggers/collisions.html", context)


@login_required
@require_GET
def run_results_json(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    """A run's results in skill-creator's run_eval shape, for its description loop and reports."""
    run = access.get_run_for_view(request.user, pk)
    if run.status != TriggerRun.DONE:
        return JsonResponse(
            {"error": f"The run is {run.status}; results are exported when it is done."},
            status=409,
        )
    data = run_eval_results(run.skill, run.description, outcomes_of(run))
    response = JsonResponse(data, json_dumps_params={"indent": 2, "ensure_ascii": False})
    response["Content-Disposition"] = (
        f'attachment; filename="{run.skill}-v{run.version_number}-run-{run.pk}-results.json"'
    )
    return response
