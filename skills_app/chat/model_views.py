"""A conversation's model: the picker (model, thinking, effort) and the new conversation that
carries a summary when this one is full."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from skills_app.chat.forms import ModelSettingsForm
from skills_app.chat.summaries import SummaryError, check_summary_limit, continue_with_summary
from skills_app.core.model_catalog import EFFORT_LEVELS, get_model
from skills_app.core.summary import char_limit, visible_transcript
from skills_app.models import Conversation
from skills_app.policy.access import policy_for
from skills_app.policy.limits import LimitReached
from skills_app.runs import agent_setup, store


def _get_conversation_for_user(user: Any, pk: int) -> Conversation:
    """The conversation if `user` owns it and has not deleted it; 404 otherwise (no hint)."""
    try:
        # A deleted conversation is gone for its owner: no summary brings its content back.
        return Conversation.objects.owned_by(user).get(pk=pk)
    except Conversation.DoesNotExist:
        raise Http404("No such conversation.") from None


def picker_context(conversation: Conversation) -> dict[str, Any]:
    """What the picker shows: the models the owner's policy offers, with their prices, and this
    conversation's picks."""
    config = agent_setup.agent_config(conversation)
    options = []
    for model_id in policy_for(conversation.owner_id).models:
        info = get_model(model_id)
        options.append(
            {
                "id": model_id,
                "label": info.label if info else model_id,
                "prices": (
                    f"${info.prices.input.normalize()} in / ${info.prices.output.normalize()} out "
                    "per million tokens"
                    if info
                    else ""
                ),
                "efforts": ", ".join(info.efforts) if info and info.efforts else "none",
            }
        )
    info = get_model(config.model)
    return {
        "model": config.model,
        "label": info.label if info else config.model,
        "thinking": bool(config.thinking),
        "effort": config.effort or "",
        "options": options,
        "efforts": EFFORT_LEVELS,
    }


@login_required
@require_POST
def conversation_settings(request: HttpRequest, pk: int) -> HttpResponse:
    """Save the picker: the model (one the person's policy offers), thinking on/off and effort."""
    conversation = _get_conversation_for_user(request.user, pk)
    form = ModelSettingsForm(request.POST, offered=policy_for(request.user.pk).models)
    if not form.is_valid():
        errors = "; ".join(" ".join(str(m) for m in e) for e in form.errors.values())
        # Plain text: a refused value is echoed back, never as markup.
        return HttpResponse(
            f"The settings were not saved. {errors}",
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    data = form.cleaned_data
    # update(): changing the model is not activity and must not reorder the conversation list.
    Conversation.objects.filter(pk=conversation.pk).update(
        model=data["model"], thinking=data["thinking"] == "on", effort=data["effort"]
    )
    return redirect("conversation", pk=conversation.pk)


def _summary_page(
    request: HttpRequest, conversation: Conversation, *, error: str = "", status: int = 200
) -> HttpResponse:
    rows = store.history(conversation)
    model = agent_setup.agent_config(conversation).model
    transcript = visible_transcript(rows, limit_chars=char_limit(model))
    return render(
        request,
        "skills_app/chat/summarise.html",
        {
            "conversation": conversation,
            "chars": len(transcript),
            "tokens": len(transcript) // 4,
            "error": error,
        },
        status=status,
    )


@login_required
@require_http_methods(["GET", "POST"])
async def conversation_summarise(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: what will happen; POST: summarise this conversation into a new one and open it."""
    user = await request.auser()
    conversation = await sync_to_async(_get_conversation_for_user)(user, pk)
    if request.method == "GET":
        return await sync_to_async(_summary_page)(request, conversation)
    try:
        await sync_to_async(check_summary_limit)(conversation.owner_id)
        new = await continue_with_summary(conversation)
    except LimitReached as exc:
        return await sync_to_async(_summary_page)(request, conversation, error=str(exc), status=429)
    except SummaryError as exc:
        return await sync_to_async(_summary_page)(request, conversation, error=str(exc), status=502)
    return redirect("conversation", pk=new.pk)
