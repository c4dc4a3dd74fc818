"""The actions a tab sent, by the id the tab made for each: a re-sent action is done once."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ActionReceipt(models.Model):
    """An action of the chat websocket that was taken, under the id its tab gave it.

    A tab sends an action again after a reconnect when no acknowledgement came back; the
    receipt tells the server it was taken already, so it is acknowledged and not taken twice.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    action_id = models.UUIDField()
    kind = models.CharField(max_length=20)
    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "action_id"], name="action_receipt_once")
        ]
        # The per-minute cap counts a user's newest receipts.
        indexes = [models.Index(fields=["user", "created_at"], name="action_receipt_recent")]

    def __str__(self) -> str:
        return f"{self.kind} {self.action_id} by user {self.user_id}"
