"""Messages sent while a run was busy: kept in order until the run ends, then sent one by one."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class QueuedMessage(models.Model):
    """A message typed while a run was busy; sent when the run ends, unless cancelled first.

    Stored on the server (not in the tab) so it survives a reload and shows in every tab.
    """

    PENDING = "pending"
    SENT = "sent"
    CANCELLED = "cancelled"
    FAILED = "failed"
    STATUS_CHOICES = [
        (PENDING, "waiting for the run to end"),
        (SENT, "sent"),
        (CANCELLED, "cancelled"),
        (FAILED, "could not be sent"),
    ]

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.PROTECT, related_name="queued_messages"
    )
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    text = models.TextField()
    status = models.CharField(max_length=10, choices=STATUS_CHOICES, default=PENDING)
    # Why it could not be sent (FAILED), in words for the user.
    error = models.CharField(max_length=500, blank=True)
    run = models.ForeignKey(
        "skills_app.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["conversation", "pk"]
        indexes = [models.Index(fields=["conversation", "status"], name="queued_conv_status")]

    def __str__(self) -> str:
        return f"queued #{self.pk} ({self.status}) in conversation {self.conversation_id}"
