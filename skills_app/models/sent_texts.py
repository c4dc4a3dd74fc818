"""Fingerprints of what each person sent (their messages and attached files): how an MCP call
quoting another person's words is told (`skills_app.sent_texts`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SentTextFingerprint(models.Model):
    """One winnowed hash (`core.fingerprints`) of something this person sent; no text is kept."""

    # CASCADE: derived data (users are deactivated, not deleted, so their rows stay).
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    hash = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["hash", "owner"], name="unique_sent_text_fingerprint")
        ]

    def __str__(self) -> str:
        return f"fingerprint {self.hash:#x} of user {self.owner_id}"
