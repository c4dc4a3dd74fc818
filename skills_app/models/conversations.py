"""Conversations, their messages and the event log browsers resume from."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models

from skills_app.core.model_catalog import EFFORT_LEVELS
from skills_app.core.profiles import DEFAULT_PROFILE, profile_choices
from skills_app.core.transcript import STATE_KIND, StoredMessage


class ConversationQuerySet(models.QuerySet["Conversation"]):
    def owned_by(self, user: Any) -> ConversationQuerySet:
        """What an owner sees of their conversations: their own, minus the ones they deleted."""
        user_id = user if isinstance(user, int) else user.pk
        return self.filter(owner_id=user_id, deleted_at__isnull=True)


class Conversation(models.Model):
    # The delivery profiles, from the core's registry (the one place that names them).
    PROFILE_CHOICES = profile_choices()

    # PROTECT: a user with conversations is deactivated, not deleted, so the audit keeps its owner.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="conversations"
    )
    title = models.CharField(max_length=200, default="New conversation")
    # The title was made automatically (after the first answer), not typed: editing the first
    # message makes it again.
    title_auto = models.BooleanField(default=False)
    profile = models.CharField(max_length=20, choices=PROFILE_CHOICES, default=DEFAULT_PROFILE)
    model = models.CharField(max_length=100, blank=True, help_text="Empty: the configured default.")
    # Adaptive thinking and effort, picked per conversation; None / "" follow ANTHROPIC_THINKING
    # and ANTHROPIC_EFFORT.
    thinking = models.BooleanField(
        null=True, blank=True, help_text="Empty: the configured default."
    )
    effort = models.CharField(
        max_length=10,
        blank=True,
        choices=[(level, level) for level in EFFORT_LEVELS],
        help_text="Empty: the configured default.",
    )
    # Names of the only skills offered in this conversation (the comparison page); empty: all.
    skill_filter = models.JSONField(default=list, blank=True)

    # The base system prompt: Skillscope's own, or the one of the design the profile reproduces
    # (the comparison page's "as the source design").
    class BasePrompt(models.TextChoices):
        SHARED = "shared", "same base prompt"
        DESIGN = "design", "as the source design"

    SHARED_PROMPT = BasePrompt.SHARED
    DESIGN_PROMPT = BasePrompt.DESIGN
    base_prompt = models.CharField(
        max_length=10, choices=BasePrompt.choices, default=BasePrompt.SHARED
    )
    session_id = models.UUIDField(default=uuid.uuid4, editable=False, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The last RunEvent.seq handed out; incremented under a row lock so seq is gap-free per conversation.
    last_event_seq = models.BigIntegerField(default=0)
    # Pinned by its owner: listed first in the sidebar, the latest pinned on top.
    pinned_at = models.DateTimeField(null=True, blank=True)
    # Deleting hides a conversation from its owner; every row stays for the audit.
    deleted_at = models.DateTimeField(null=True, blank=True)
    deleted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
    )

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        permissions = [
            ("inspect_injected_content", "Can inspect injected content"),
            ("run_unsandboxed_commands", "Can run commands without a sandbox"),
        ]

    def __str__(self) -> str:
        return f"{self.title} (#{self.pk})"


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", "user"
        ASSISTANT = "assistant", "assistant"

    # Every kind the code stores (the core writes them as plain strings: it knows no Django).
    class Kind(models.TextChoices):
        TEXT = "text", "text"
        COMMAND = "command", "slash command (shown, never sent)"
        ATTACHMENTS = "attachments", "attached files (shown as chips; the model gets their blocks)"
        TOOL_USE = "tool_use", "tool use"
        TOOL_RESULT = "tool_result", "tool result"
        SKILL_STATUS = "skill_status", "skill status"
        SKILL_PROMPT = "skill_prompt", "skill prompt (hidden)"
        SKILL_STATE = STATE_KIND, "skill state (hidden, shapes the system prompt)"
        PERMISSIONS = "permissions", "applied permissions"
        ERROR = "error", "error"
        NOTICE = "notice", "notice"

    USER = Role.USER
    ASSISTANT = Role.ASSISTANT

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.PROTECT, related_name="messages"
    )
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.JSONField(default=list)
    is_meta = models.BooleanField(default=False, help_text="Hidden from the transcript.")
    to_model = models.BooleanField(default=True, help_text="Sent to the model.")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.TEXT)
    run = models.ForeignKey(
        "skills_app.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    invocation = models.ForeignKey(
        "skills_app.SkillInvocation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="messages",
    )
    # Free facts for rendering: partial=True for text cut by a failure, tool decisions, artifacts.
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="unique_message_seq")
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.role}/{self.kind}{' (hidden)' if self.is_meta else ''}"


class RunEvent(models.Model):
    """Append-only log of what a run did; browsers resume from the last seq they saw."""

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.PROTECT, related_name="events"
    )
    run = models.ForeignKey(
        "skills_app.Run", null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    seq = models.BigIntegerField()
    type = models.CharField(max_length=40)
    data = models.JSONField(default=dict)
    # True when data holds hidden content: such events are filtered for users without the inspect permission.
    hidden = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="unique_event_seq")
        ]

    def __str__(self) -> str:
        return f"{self.type} #{self.seq}"


def rows_with_ids(conversation_id: int) -> tuple[list[int], list[StoredMessage]]:
    """The conversation's rows in order, and their ids (same positions)."""
    rows = Message.objects.filter(conversation_id=conversation_id).order_by("seq")
    fields = ("pk", "role", "content", "kind", "is_meta", "to_model", "meta")
    ids: list[int] = []
    stored: list[StoredMessage] = []
    for pk, role, content, kind, is_meta, to_model, meta in rows.values_list(*fields):
        ids.append(pk)
        stored.append(
            StoredMessage(role, tuple(content), kind, is_meta, to_model, dict(meta or {}))
        )
    return ids, stored
