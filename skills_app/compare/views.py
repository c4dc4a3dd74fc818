"""The comparison page: one prompt under each delivery profile, side by side (staff only)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from skills_app.audit import requests as audit
from skills_app.chat import conversations as conv
from skills_app.chat import rendering
from skills_app.chat.usage import run_cost
from skills_app.core.profiles import PROFILES
from skills_app.http import AuthedHttpRequest
from skills_app.models import Comparison, Conversation, ModelCall, Run
from skills_app.policy.access import policy_for
from skills_app.registry.skills import skills_for_user
from skills_app.runs import supervisor as runs

PROMPT_LIMIT = 4000
BASE_PROMPTS = dict(Conversation.BasePrompt.choices)


def _require_staff(request: HttpRequest) -> None:
    if not request.user.is_staff:
        raise PermissionDenied("The comparison page is for staff.")


def _get_comparison_for_user(request: AuthedHttpRequest, pk: int) -> Comparison:
    _require_staff(request)
    try:
        return Comparison.objects.get(pk=pk, created_by=request.user)
    except Comparison.DoesNotExist:
        raise Http404("No such comparison.") from None


def _skill_choices(user_id: int) -> list[dict[str, str]]:
    return [
        {"name": s.name, "description": s.description}
        for s in skills_for_user(user_id).skills()
        if s.model_invocable or s.user_invocable
    ]


@login_required
@require_http_methods(["GET"])
def compare_home(request: AuthedHttpRequest) -> HttpResponse:
    _require_staff(request)
    return render(
        request,
        "skills_app/compare/home.html",
        {
            "skills": _skill_choices(request.user.pk),
            "comparisons": Comparison.objects.filter(created_by=request.user)[:20],
            "profiles": PROFILES,
            "base_prompts": BASE_PROMPTS,
            "base_prompt": Conversation.SHARED_PROMPT,
            **design_notes(),
        },
    )


def design_notes() -> dict[str, Any]:
    """The settings in force that change how a profile behaves (shown beside the columns)."""
    return {
        "skill_state": settings.SKILL_STATE_LIFETIME,
        "tool_result_substitutions": settings.TOOL_RESULT_SUBSTITUTIONS,
    }


def _create(
    user: Any, prompt: str, skills: list[str], base_prompt: str
) -> tuple[Comparison, list[int]]:
    # The configured default when the person may use it, else the first model they may.
    policy = policy_for(user.pk)
    model = "" if policy.offers(settings.ANTHROPIC_MODEL) else policy.default_model()
    with transaction.atomic():
        comparison = Comparison.objects.create(
            created_by=user, prompt=prompt, skills=skills, base_prompt=base_prompt
        )
        ids = []
        for profile in PROFILES:
            conversation = Conversation.objects.create(
                owner=user,
                model=model,
                title=f"Compare #{comparison.pk} · {profile}",
                profile=profile,
                skill_filter=skills,
                base_prompt=base_prompt,
            )
            comparison.conversations.add(conversation)
            ids.append(conversation.pk)
    return comparison, ids


@login_required
@require_http_methods(["POST"])
async def compare_start(request: HttpRequest) -> HttpResponse:
    user = await request.auser()
    if not user.is_staff:
        raise PermissionDenied("The comparison page is for staff.")
    prompt = (request.POST.get("prompt") or "").strip()
    skills = [s for s in request.POST.getlist("skills") if s]
    base_prompt = request.POST.get("base_prompt") or Conversation.SHARED_PROMPT
    known = {s["name"] for s in await sync_to_async(_skill_choices)(user.pk)}
    error = ""
    status: int | None = None
    if base_prompt not in BASE_PROMPTS:
        error = "Choose the base prompt: " + " or ".join(f'"{v}"' for v in BASE_PROMPTS.values())
    elif not prompt:
        error = "Write a prompt to compare."
    elif len(prompt) > PROMPT_LIMIT:
        error = f"The prompt is longer than {PROMPT_LIMIT} characters."
    elif not skills:
        error = "Pick at least one skill to offer."
    elif set(skills) - known:
        error = "Unknown skill(s): " + ", ".join(sorted(set(skills) - known))
    else:
        made: list[Comparison] = []

        def create() -> list[int]:
            comparison, ids = _create(user, prompt, skills, base_prompt)
            made.append(comparison)
            return ids

        try:
            # The comparison, its conversations and their runs in one transaction, with one
            # check of the limits for the three runs (three messages): all start, or nothing
            # is created and the page says which limit stands in the way.
            await runs.start_runs(create, prompt, user_id=user.pk)
        except runs.RunError as exc:
            error = str(exc)
            status = 429 if isinstance(exc, runs.LimitRefusal) else None
        else:
            # The three runs execute concurrently, like three users asking the same question.
            return HttpResponseRedirect(reverse("compare-detail", args=[made[0].pk]))
    context = {
        "skills": await sync_to_async(_skill_choices)(user.pk),
        "comparisons": [],
        "profiles": PROFILES,
        "error": error,
        "prompt": prompt,
        "picked": skills,
        "base_prompts": BASE_PROMPTS,
        "base_prompt": base_prompt if base_prompt in BASE_PROMPTS else "",
        **design_notes(),
    }
    return await sync_to_async(render)(
        request,
        "skills_app/compare/home.html",
        context,
        status=400 if status is None else status,
    )


def request_sizes(run: Run | None) -> list[dict[str, Any]]:
    """Characters per part of the requests, summed over the run's model calls (no total row)."""
    totals = dict.fromkeys((key for key, _label in audit.SIZE_PARTS), 0)
    for view in audit.requests_for_run(run) if run is not None else []:
        for part, size in audit.size_breakdown(view).items():
            if part in totals:  # size_breakdown adds its own "total": summing it doubled it
                totals[part] += size["chars"]
    return [
        {"part": label, "chars": totals[key], "tokens": audit.estimate_tokens(totals[key])}
        for key, label in audit.SIZE_PARTS
    ]


def _column(conversation: Conversation) -> dict[str, Any]:
    run = conversation.runs.order_by("-started_at", "-pk").first()
    rows = conv.visible_messages(conversation, can_inspect=False)
    # The transcript's facts (tool results, invocation states) as the chat page has them, so a
    # finished tool call shows its result instead of "Running…".
    ctx = conv.transcript_context(conversation, rows, can_inspect=False)
    html = [rendering.render_message(m, can_inspect=False, ctx=ctx) for m in rows]
    sizes = request_sizes(run)
    total = sum(s["chars"] for s in sizes)
    return {
        "conversation": conversation,
        "run": run,
        "active": run is not None and run.status in Run.ACTIVE,
        "messages_html": html,
        "model_calls": run.model_calls if run else 0,
        "sizes": sizes,
        "total_chars": total,
        "total_tokens": audit.estimate_tokens(total),
        # Measured, from the usage the API reported for each call of the run.
        "usage": run_cost(run.pk) if run is not None else None,
        "call_shares": _call_shares(run) if run is not None else [],
    }


def _call_shares(run: Run) -> list[dict[str, Any]]:
    """Per call: the share of its prompt read from the cache, and the skill loaded by then."""
    shares = []
    for call in ModelCall.objects.filter(run=run).order_by("call", "pk"):
        total = call.input_total
        shares.append(
            {
                "call": call.call,
                "share": round(call.cache_read_input_tokens * 100 / total) if total else 0,
                "tokens": total,
                "skill": call.skill,
            }
        )
    return shares


@login_required
@require_http_methods(["GET"])
def compare_detail(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    comparison = _get_comparison_for_user(request, pk)
    order = {p: i for i, p in enumerate(PROFILES)}
    conversations = sorted(comparison.conversations.all(), key=lambda c: order.get(c.profile, 9))
    columns = [_column(c) for c in conversations]
    context = {
        "comparison": comparison,
        "columns": columns,
        "active": any(c["active"] for c in columns),
        **design_notes(),
    }
    template = (
        "skills_app/compare/_columns.html" if request.htmx else "skills_app/compare/detail.html"
    )
    return render(request, template, context)
