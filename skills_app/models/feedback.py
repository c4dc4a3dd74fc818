"""What a person thought of an answer: thumbs up or down, with an optional short note."""

from __future__ import annotations

from django.conf import settings
from django.db import models

# A note is a remark, not a report: long enough for a sentence or two.
NOTE_MAX_CHARS = 500


class AnswerFeedback(models.Model):
    """One person's rating of one assistant answer; rating again replaces it."""

    class Rating(models.TextChoices):
        UP = "up", "thumbs up"
        DOWN = "down", "thumbs down"

    UP = Rating.UP
    DOWN = Rating.DOWN

    # PROTECT on both: feedback is read by auditors, like the rows it is about.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="answer_feedback"
    )
    message = models.ForeignKey(
        "skills_app.Message", on_delete=models.PROTECT, related_name="feedback"
    )
    rating = models.CharField(max_length=4, choices=Rating.choices)
    note = models.CharField(max_length=NOTE_MAX_CHARS, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["user", "message"], name="one_feedback_per_answer")
        ]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} on message #{self.message_id}"
