"""Every permission decision a run made, with its reason: the record auditors filter."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class PermissionDecision(models.Model):
    """One decision on one call: what decided it (the rule and where it came from, the review or
    the person) and the call it decided. Append-only, like the rest of the audit."""

    class Outcome(models.TextChoices):
        ALLOW = "allow", "allowed"
        DENY = "deny", "denied"
        REFUSED = "refused", "refused without asking (it quoted hidden skill text)"
        ASK = "ask", "asked (not answered here)"

    class Source(models.TextChoices):
        ADMIN = "admin", "admin rule"
        REVIEW = "review", "the skill's reviewed manifest"
        SKILL = "skill", "the skill's allowed-tools"
        CONVERSATION = "conversation", 'a user\'s "allow for this conversation"'
        USER = "user", "the user's answer"
        DEFAULT = "default", "default"
        HIDDEN = "hidden", "hidden skill text in the call"

    ALLOW = Outcome.ALLOW
    DENY = Outcome.DENY
    REFUSED = Outcome.REFUSED

    conversation = models.ForeignKey(
        "skills_app.Conversation", on_delete=models.PROTECT, related_name="permission_decisions"
    )
    run = models.ForeignKey(
        "skills_app.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    tool = models.CharField(max_length=100)
    call_text = models.TextField(help_text="The call in rule syntax, e.g. Bash(git status).")
    input = models.JSONField(default=dict, blank=True)
    decision = models.CharField(max_length=10, choices=Outcome.choices)
    source = models.CharField(max_length=20, choices=Source.choices)
    rule_text = models.CharField(max_length=1000, blank=True)
    rule_id = models.IntegerField(null=True, blank=True, help_text="The admin rule's id.")
    reason = models.TextField(blank=True)
    skill = models.CharField(max_length=200, blank=True, help_text="The skill active in the turn.")
    review = models.ForeignKey(
        "skills_app.SkillReview", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reviewer_name = models.CharField(max_length=200, blank=True)
    approval = models.ForeignKey(
        "skills_app.Approval", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.call_text}: {self.decision} ({self.get_source_display()})"
