"""Conversations, their messages and the event log browsers resume from."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from skills_app.core.profiles import DEFAULT_PROFILE, profile_choices


class Conversation(models.Model):
    # The delivery profiles, from the core's registry (the one place that names them).
    PROFILE_CHOICES = profile_choices()

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=200, default="New conversation")
    profile = models.CharField(max_length=20, choices=PROFILE_CHOICES, default=DEFAULT_PROFILE)
    model = models.CharField(max_length=100, blank=True, help_text="Empty: the configured default.")
    # Names of the only skills offered in this conversation (the comparison page); empty: all.
    skill_filter = models.JSONField(default=list, blank=True)
    session_id = models.UUIDField(default=uuid.uuid4, editable=False, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The last RunEvent.seq handed out; incremented under a row lock so seq is gap-free per conversation.
    last_event_seq = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-updated_at"]
        permissions = [
            ("inspect_injected_content", "Can inspect injected content"),
            ("run_unsandboxed_commands", "Can run commands without a sandbox"),
        ]

    def __str__(self) -> str:
        return f"{self.title} (#{self.pk})"


class Message(models.Model):
    USER = "user"
    ASSISTANT = "assistant"
    ROLE_CHOICES = [(USER, "user"), (ASSISTANT, "assistant")]

    KIND_CHOICES = [
        ("text", "text"),
        ("tool_use", "tool use"),
        ("tool_result", "tool result"),
        ("skill_status", "skill status"),
        ("skill_prompt", "skill prompt (hidden)"),
        ("permissions", "applied permissions"),
        ("error", "error"),
        ("notice", "notice"),
    ]

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.CASCADE, related_name="messages"
    )
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=ROLE_CHOICES)
    content = models.JSONField(default=list)
    is_meta = models.BooleanField(default=False, help_text="Hidden from the transcript.")
    to_model = models.BooleanField(default=True, help_text="Sent to the model.")
    kind = models.CharField(max_length=20, choices=KIND_CHOICES, default="text")
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
        "skills_app.Conversation", on_delete=models.CASCADE, related_name="events"
    )
    run = models.ForeignKey(
        "skills_app.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="events"
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
