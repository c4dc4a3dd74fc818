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
from skills_app.chat import rendering
from skills_app.core.profiles import PROFILES
from skills_app.models import Comparison, Conversation, Run
from skills_app.registry.skills import skills_for_user
from skills_app.runs import supervisor as runs

PROMPT_LIMIT = 4000
BASE_PROMPTS = dict(Conversation.BASE_PROMPT_CHOICES)


def _require_staff(request: HttpRequest) -> None:
    if not request.user.is_staff:
        raise PermissionDenied("The comparison page is for staff.")


def _get_comparison_for_user(request: HttpRequest, pk: int) -> Comparison:
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
def compare_home(request: HttpRequest) -> HttpResponse:
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
    with transaction.atomic():
        comparison = Comparison.objects.create(
            created_by=user, prompt=prompt, skills=skills, base_prompt=base_prompt
        )
        ids = []
        for profile in PROFILES:
            conversation = Conversation.objects.create(
                owner=user,
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
    if error:
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
            request, "skills_app/compare/home.html", context, status=400
        )
    comparison, ids = await sync_to_async(_create)(user, prompt, skills, base_prompt)
    # The three runs execute concurrently, like three users asking the same question.
    for conversation_id in ids:
        await runs.start_run(conversation_id, prompt, user_id=user.pk)
    return HttpResponseRedirect(reverse("compare-detail", args=[comparison.pk]))


def _column(conversation: Conversation) -> dict[str, Any]:
    run = conversation.runs.order_by("-started_at").first()
    rows = list(conversation.messages.filter(is_meta=False).order_by("seq"))
    html = [rendering.render_message(m, can_inspect=False) for m in rows]
    totals: dict[str, int] = {}
    requests = audit.requests_for_run(run) if run is not None else []
    for view in requests:
        for part, size in audit.size_breakdown(view).items():
            totals[part] = totals.get(part, 0) + size["chars"]
    return {
        "conversation": conversation,
        "run": run,
        "active": run is not None and run.status in Run.ACTIVE,
        "messages_html": html,
        "model_calls": run.model_calls if run else 0,
        "sizes": [
            {"part": part, "chars": chars, "tokens": audit.estimate_tokens(chars)}
            for part, chars in sorted(totals.items())
        ],
        "total_chars": sum(totals.values()),
        "total_tokens": audit.estimate_tokens(sum(totals.values())),
    }


@login_required
@require_http_methods(["GET"])
def compare_detail(request: HttpRequest, pk: int) -> HttpResponse:
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
