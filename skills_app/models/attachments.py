"""Files people attach to their messages (saved in the conversation workspace's in/)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Attachment(models.Model):
    """One attached file: uploaded first (pending), then sent with one user message.

    The bytes live in the workspace (`path`, e.g. "in/report.pdf"); the digest lets a download
    prove it serves what the person attached, not what a command later wrote over it.
    """

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.CASCADE, related_name="attachments"
    )
    # PROTECT: users are deactivated, not deleted (the audit keeps who attached what).
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # The user message it was sent with; null while it waits in the composer.
    message = models.ForeignKey(
        "skills_app.Message",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="attachments",
    )
    name = models.CharField(max_length=200)
    path = models.CharField(max_length=300)
    media_type = models.CharField(max_length=120)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.path} ({self.size} bytes) in conversation {self.conversation_id}"

    def info(self) -> dict[str, object]:
        """What a chip shows (kept in the message row's meta, so rendering needs no query)."""
        return {
            "id": self.pk,
            "name": self.name,
            "path": self.path,
            "media_type": self.media_type,
            "size": self.size,
        }
