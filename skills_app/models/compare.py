"""The delivery-profile comparison (staff tool)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from skills_app.models.conversations import Conversation


class Comparison(models.Model):
    """One prompt run under each delivery profile, side by side (staff tool)."""

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="comparisons"
    )
    prompt = models.TextField()
    skills = models.JSONField(default=list, blank=True)
    # Which base system prompt the columns ran with (see Conversation.base_prompt).
    base_prompt = models.CharField(
        max_length=10,
        choices=Conversation.BasePrompt.choices,
        default=Conversation.BasePrompt.SHARED,
    )
    conversations = models.ManyToManyField("skills_app.Conversation", related_name="comparisons")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Comparison #{self.pk}"
