"""Admin permission rules, approvals that answer an `ask`, and per-conversation grants."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class PermissionRule(models.Model):
    # Listed in the order the rules are applied: deny, then ask, then allow.
    class Behavior(models.TextChoices):
        DENY = "deny", "deny"
        ASK = "ask", "ask"
        ALLOW = "allow", "allow"

    ALLOW = Behavior.ALLOW
    ASK = Behavior.ASK
    DENY = Behavior.DENY

    behavior = models.CharField(max_length=5, choices=Behavior.choices)
    rule_text = models.CharField(
        max_length=500, help_text="e.g. Skill(pdf), Bash(git diff *), Read(./docs/**)"
    )
    skill = models.CharField(
        max_length=200,
        blank=True,
        help_text="Empty: a global rule. A skill name: applies only while that skill's turn is active.",
    )
    enabled = models.BooleanField(default=True)
    # Applies to: nobody named here means everyone; otherwise only these people and the members
    # of these groups (the rule tester shows it; `skills_app.policy.rules` filters by it).
    applies_to_groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="permission_rules",
        help_text="Only members of these groups (with the people below). Empty: everyone.",
    )
    applies_to_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="permission_rules",
        help_text="Only these people (with the groups above). Empty: everyone.",
    )
    note = models.TextField(blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    position = models.PositiveIntegerField(default=0, help_text="Order within the same behaviour.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]

    def __str__(self) -> str:
        scope = f" [{self.skill}]" if self.skill else ""
        return f"{self.behavior} {self.rule_text}{scope}"


class Approval(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        ALLOW_ONCE = "allow_once", "allow once"
        ALLOW_CONVERSATION = "allow_conversation", "allow for this conversation"
        DENY = "deny", "deny"
        TIMEOUT = "timeout", "timed out"
        CANCELLED = "cancelled", "cancelled"

    PENDING = Status.PENDING
    ALLOW_ONCE = Status.ALLOW_ONCE
    ALLOW_CONVERSATION = Status.ALLOW_CONVERSATION
    DENY = Status.DENY
    TIMEOUT = Status.TIMEOUT
    CANCELLED = Status.CANCELLED

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.PROTECT, related_name="approvals"
    )
    run = models.ForeignKey("skills_app.Run", on_delete=models.PROTECT, related_name="approvals")
    tool_use_id = models.CharField(max_length=100, blank=True)
    tool = models.CharField(max_length=100)
    input = models.JSONField(default=dict)
    call_text = models.TextField()
    skill = models.CharField(max_length=200, blank=True, help_text="Active skill, if any.")
    rule_text = models.CharField(max_length=500, blank=True)
    reason = models.TextField(blank=True, help_text="Why the rules engine asked.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    deny_reason = models.TextField(blank=True)
    # PROTECT: who answered is part of the audit; such a user is deactivated, not deleted.
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"{self.call_text}: {self.status}"


class ConversationGrant(models.Model):
    """An "allow for this conversation" answer: a rule that holds only inside one conversation."""

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.PROTECT, related_name="grants"
    )
    rule_text = models.CharField(max_length=500)
    approval = models.ForeignKey(
        "skills_app.Approval", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
