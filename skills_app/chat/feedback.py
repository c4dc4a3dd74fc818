"""Feedback on answers: the owner's thumbs up or down on an assistant answer, with a short note."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_POST

from skills_app import trail
from skills_app.chat.controls import with_csrf
from skills_app.http import AuthedHttpRequest
from skills_app.models import AnswerFeedback, AuditEvent, Conversation, Message
from skills_app.models.feedback import NOTE_MAX_CHARS

# "none" takes a rating back (pressing the pressed button again).
RATINGS = (AnswerFeedback.UP, AnswerFeedback.DOWN, "none")


class FeedbackError(ValueError):
    """Feedback that cannot be stored, with what to send instead."""


def rateable(row: Message) -> bool:
    """An answer the chat offers feedback on: the model's visible text, not a replaced one."""
    meta = row.meta if isinstance(row.meta, dict) else {}
    return (
        row.role == Message.ASSISTANT
        and row.kind == Message.Kind.TEXT
        and not row.is_meta
        and not meta.get("excluded")
        and not meta.get("subagent_run")
        and not meta.get("imported_subagent")
    )


def feedback_by_answer(user_id: int, rows: Iterable[Message]) -> dict[int, AnswerFeedback]:
    """The person's feedback on those of `rows` that can be rated, by message id."""
    ids = [row.pk for row in rows if rateable(row)]
    if not ids:
        return {}
    found = AnswerFeedback.objects.filter(user_id=user_id, message_id__in=ids)
    return {f.message_id: f for f in found}


def give_feedback(
    user: Any, answer: Message, rating: str, note: str | None = None
) -> AnswerFeedback | None:
    """Store `user`'s rating of `answer` (replacing an earlier one); "none" removes it.

    A `note` of None keeps the note already given (a change of rating alone).
    """
    if rating not in RATINGS:
        raise FeedbackError("Rate an answer with up or down (or none to take a rating back).")
    note = note.strip() if note is not None else None
    if note is not None and len(note) > NOTE_MAX_CHARS:
        raise FeedbackError(
            f"A note is at most {NOTE_MAX_CHARS} characters; this one has {len(note)}."
        )
    with transaction.atomic():
        if rating == "none":
            AnswerFeedback.objects.filter(user=user, message=answer).delete()
            stored = None
        else:
            fields = {"rating": rating} if note is None else {"rating": rating, "note": note}
            stored, _ = AnswerFeedback.objects.update_or_create(
                user=user, message=answer, defaults=fields
            )
        # The note itself stays in the feedback row; the trail says who rated what, and when.
        trail.record(
            AuditEvent.FEEDBACK_GIVEN,
            target=f"message #{answer.pk} of conversation #{answer.conversation_id}",
            actor=user,
            rating=rating,
            noted=bool(stored and stored.note),
        )
    return stored


def _get_answer_for_user(request: AuthedHttpRequest, pk: int, message_id: int) -> Message:
    """The answer if the requester owns its conversation and it can be rated; 404 otherwise."""
    if not Conversation.objects.owned_by(request.user).filter(pk=pk).exists():
        raise Http404("No such conversation.")
    try:
        answer = Message.objects.get(pk=message_id, conversation_id=pk)
    except Message.DoesNotExist:
        raise Http404("No such answer in this conversation.") from None
    if not rateable(answer):
        raise Http404("No such answer in this conversation.")
    return answer


def feedback_html(
    answer: Message, given: AnswerFeedback | None, *, error: str = "", note_open: bool = False
) -> str:
    """The `_feedback.html` partial of one answer (id `feedback-<message id>`)."""
    return render_to_string(
        "skills_app/chat/_feedback.html",
        {
            "m": answer,
            "conversation_id": answer.conversation_id,
            "given": given,
            "error": error,
            "note_open": note_open,
            "note_max": NOTE_MAX_CHARS,
        },
    )


@login_required
@require_POST
def answer_feedback(request: AuthedHttpRequest, pk: int, message_id: int) -> HttpResponse:
    """Rate an answer; htmx gets the answer's feedback controls back, a plain post the page."""
    answer = _get_answer_for_user(request, pk, message_id)
    rating = request.POST.get("rating", "")
    try:
        stored = give_feedback(request.user, answer, rating, request.POST.get("note"))
    except FeedbackError as exc:
        if request.htmx:
            # Swapped in place, so the person reads why beside what they typed.
            current = AnswerFeedback.objects.filter(user=request.user, message=answer).first()
            html = feedback_html(answer, current, error=str(exc), note_open=True)
            return HttpResponse(with_csrf(html, get_token(request)), status=422)
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    if request.htmx:
        # A fresh rating opens the note field; saving a note closes it.
        just_rated = stored is not None and "note" not in request.POST
        html = feedback_html(answer, stored, note_open=just_rated)
        return HttpResponse(with_csrf(html, get_token(request)))
    return redirect(reverse("conversation", args=[pk]) + f"#message-{answer.pk}")
