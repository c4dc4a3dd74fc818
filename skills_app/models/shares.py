"""Read-only links to a conversation.

The token is shown once, to the owner who made it; only its SHA-256 is stored, so the table
(a backup, the admin) never holds a working link. A link stops working when it is revoked, when
it expires, or when its conversation is deleted.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

# 32 random bytes (256 bits), URL-safe: not derived from any id, never guessable.
TOKEN_BYTES = 32
# How long a new link works: (days, label). The first is the default.
EXPIRY_CHOICES = ((7, "7 days"), (1, "1 day"), (30, "30 days"))
DEFAULT_EXPIRY_DAYS = EXPIRY_CHOICES[0][0]


def token_digest(token: str) -> str:
    """What is stored of a token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class ConversationShareQuerySet(models.QuerySet["ConversationShare"]):
    def live(self) -> ConversationShareQuerySet:
        """Links that work now: not revoked, not expired, of a conversation not deleted."""
        return self.filter(
            revoked_at__isnull=True,
            expires_at__gt=timezone.now(),
            conversation__deleted_at__isnull=True,
        )


class ConversationShare(models.Model):
    """One read-only link to a conversation, made by its owner."""

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.CASCADE, related_name="shares"
    )
    # PROTECT: users are deactivated, not deleted (the audit keeps who shared what).
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects: Any = ConversationShareQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"share #{self.pk} of conversation #{self.conversation_id}"

    @classmethod
    def create_for(
        cls, conversation: Any, user: Any, *, days: int = DEFAULT_EXPIRY_DAYS
    ) -> tuple[ConversationShare, str]:
        """A new link and its token (the only time the token exists in clear)."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        share = cls.objects.create(
            conversation=conversation,
            created_by=user,
            token_hash=token_digest(token),
            expires_at=timezone.now() + timedelta(days=days),
        )
        return share, token

    @property
    def is_live(self) -> bool:
        return self.revoked_at is None and self.expires_at > timezone.now()
